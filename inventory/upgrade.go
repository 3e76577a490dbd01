package inventory

import (
	"strings"
	"time"
)

// Upgrade is how up rolls the cluster to a new cluster.kubernetesVersion:
// kubeadm's order (docs/provisioning.md, "Upgrades"), workers a few at a
// time, each drained first.
type Upgrade struct {
	// MaxUnavailable is how many workers are drained and upgraded at once.
	MaxUnavailable int `json:"maxUnavailable" yaml:"maxUnavailable"`
	// DrainTimeout bounds each drain (a Go duration): past it the upgrade
	// stops and names the pods still there (a PodDisruptionBudget that
	// forbids their eviction, usually) rather than forcing them off.
	DrainTimeout string `json:"drainTimeout" yaml:"drainTimeout"`
}

const (
	DefaultUpgradeMaxUnavailable = 1
	DefaultDrainTimeout          = "5m"
)

// Drain is the parsed drain timeout of a validated inventory.
func (u Upgrade) Drain() time.Duration {
	d, _ := time.ParseDuration(u.DrainTimeout)
	return d
}

func checkUpgrade(ps *problems, inv *Inventory) {
	u := inv.Cluster.Upgrade
	const path = "cluster.upgrade"
	if u.MaxUnavailable < 1 {
		ps.errorf(path+".maxUnavailable", "%d: at least one worker must be upgraded at a time; use 1 (the default) or more", u.MaxUnavailable)
	} else if w := len(inv.Workers()); w > 0 && u.MaxUnavailable > w {
		ps.warnf(path+".maxUnavailable", "%d is more than the %d workers: every worker is drained at once, and pods that need a node have none", u.MaxUnavailable, w)
	}
	d, err := time.ParseDuration(u.DrainTimeout)
	switch {
	case err != nil:
		ps.errorf(path+".drainTimeout", "%q is not a duration: use minutes or seconds, e.g. %s", u.DrainTimeout, DefaultDrainTimeout)
	case d <= 0 || strings.HasPrefix(u.DrainTimeout, "-"):
		ps.errorf(path+".drainTimeout", "%s is not positive: e.g. %s", u.DrainTimeout, DefaultDrainTimeout)
	case d < 10*time.Second:
		ps.errorf(path+".drainTimeout", "%s is too short for any pod to be evicted and terminate gracefully (30 s by default); e.g. %s", u.DrainTimeout, DefaultDrainTimeout)
	}
}
