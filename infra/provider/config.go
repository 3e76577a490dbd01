package provider

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/ssh"
)

// Config is the provider's configuration: this run's settings and what
// the steps of one up share. The engine starts one provider process per
// up and configures it once, before any step.
//
// It takes no Pulumi inputs. What a run may do beyond converging (consent
// to destructive steps, certificates renewed on demand, nodes left out of
// an upgrade) must not outlive the command it was given to: a provider
// input would be kept in the stack's state, and changing one replaces the
// provider. Configure reads them from the environment `homelab up` gives
// the engine, the provider's one edge to it.
type Config struct {
	// allowDestroy is the nodes whose destructive steps the user consented
	// to in this run (EnvAllowDestroy); renew those whose certificates are
	// renewed whatever their dates (EnvRenewCertificates).
	allowDestroy, renew nodeList
	// upgradeWithout is the nodes this run's upgrade leaves out
	// (EnvUpgradeWithout).
	upgradeWithout []string

	// dial reaches a node; batches gather the reads of one set of nodes
	// (see readBatches); probes ask their components whether they serve.
	dial    dialer
	batches *readBatches
	probes  probes
	// detachedBound is how long a detached step may take before the
	// provider stops waiting for it (see detached.go).
	detachedBound time.Duration

	// endpoint is held by every step that changes which nodes can hold
	// the endpoint's address: see holdingEndpoint.
	endpoint *sync.Mutex
	// memberRemovals counts etcd member removals in this up: see
	// removeMember.
	memberRemovals *atomic.Int32
}

// Configure sets the provider up for this run: its settings from the
// environment (the engine's, which homelab up or pulumi handed down: also
// the namespace to dial from and the command log), one SSH connection per
// node (a node nobody used for half a
// minute is let go), and the real probes.
func (c *Config) Configure(context.Context) error {
	*c = newConfig(sshDialer(ssh.NewPool(30*time.Second, ssh.OptionsFromEnv()...)), realProbes)
	c.allowDestroy = nodeList(os.Getenv(EnvAllowDestroy))
	c.renew = nodeList(os.Getenv(EnvRenewCertificates))
	c.upgradeWithout = names(os.Getenv(EnvUpgradeWithout))
	return nil
}

func (c *Config) Annotate(a infer.Annotator) {
	a.Describe(c, "The provider takes no configuration: consent to destructive steps, certificate renewal on demand and upgrade exclusions are per run, set by homelab up's flags (or "+
		EnvAllowDestroy+", "+EnvRenewCertificates+" and "+EnvUpgradeWithout+" in the engine's environment), so that none of them outlives the command it was given to.")
}

// newConfig is a configuration that asks for nothing beyond converging,
// reaching nodes through d and their components through pr.
func newConfig(d dialer, pr probes) Config {
	return Config{
		dial:           d,
		batches:        newReadBatches(),
		probes:         pr,
		detachedBound:  15 * time.Minute,
		endpoint:       new(sync.Mutex),
		memberRemovals: new(atomic.Int32),
	}
}

type configKey struct{}

// withConfig makes every step under ctx use c. Unit tests call the steps
// without a provider server, so infer has no configuration to hand them.
func withConfig(ctx context.Context, c *Config) context.Context {
	return context.WithValue(ctx, configKey{}, c)
}

// configOf is the configuration the steps under ctx run with: infer hands
// every request the one Configure set.
func configOf(ctx context.Context) *Config {
	if c, ok := ctx.Value(configKey{}).(*Config); ok {
		return c
	}
	return infer.GetConfig[*Config](ctx)
}

// withProbes is ctx with its configuration's probes replaced by pr: a
// check that must not wait as long as a change does.
func withProbes(ctx context.Context, pr probes) context.Context {
	c := *configOf(ctx)
	c.probes = pr
	return withConfig(ctx, &c)
}

// nodeList is a comma-separated list of node names, or * for every node.
type nodeList string

// has reports whether l names node, or every node; has("*") whether it
// names every node.
func (l nodeList) has(node string) bool {
	listed := names(string(l))
	return slices.Contains(listed, "*") || slices.Contains(listed, node)
}

// names is a comma-separated list's entries, blanks left out.
func names(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
