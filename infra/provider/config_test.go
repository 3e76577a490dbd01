package provider

import (
	"context"
	"slices"
	"testing"
)

// Configure takes this run's settings from the environment homelab up
// gives the engine, and nothing else does.
func TestConfigureReadsThisRunsSettings(t *testing.T) {
	t.Setenv(EnvAllowDestroy, "cp-2, cp-3")
	t.Setenv(EnvRenewCertificates, "*")
	t.Setenv(EnvUpgradeWithout, " gpu-4,,cp-3 ")
	var c Config
	if err := c.Configure(context.Background()); err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]bool{"cp-3": true, "cp-2": true, "cp-1": false, "cp-30": false, "*": false} {
		if got := c.allowDestroy.has(node); got != want {
			t.Errorf("consent for %s: %v, want %v", node, got, want)
		}
	}
	if !c.renew.has("cp-1") {
		t.Error("* asks for every node's certificates")
	}
	if !slices.Equal(c.upgradeWithout, []string{"gpu-4", "cp-3"}) {
		t.Errorf("left out of the upgrade: %q", c.upgradeWithout)
	}
	if c.dial == nil || c.batches == nil || c.endpoint == nil || c.memberRemovals == nil || c.probes.timeout == 0 || c.detachedBound == 0 {
		t.Errorf("Configure left a dependency unset: %+v", c)
	}

	t.Setenv(EnvAllowDestroy, "")
	t.Setenv(EnvRenewCertificates, "")
	t.Setenv(EnvUpgradeWithout, "")
	c = Config{}
	if err := c.Configure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.allowDestroy.has("cp-1") || c.renew.has("cp-1") || len(c.upgradeWithout) > 0 {
		t.Errorf("nothing asked, yet %+v", c)
	}
}

// Each lab (provider process) has its own run state: a removal or a held
// endpoint lock in one is not seen by another.
func TestConfigsShareNoRunState(t *testing.T) {
	a, b := newConfig(nil, realProbes), newConfig(nil, realProbes)
	a.endpoint.Lock()
	defer a.endpoint.Unlock()
	if !b.endpoint.TryLock() {
		t.Error("two configurations share one endpoint lock")
	}
	a.memberRemovals.Add(1)
	if b.memberRemovals.Load() != 0 {
		t.Error("two configurations share one removal count")
	}
}
