package drill

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/impact"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// Where the apiserver drill parks the static pod's manifest: outside the
// kubelet's manifest directory (the kubelet reads every file in it,
// whatever its name), where `homelab doctor` and a user find it.
const (
	parkedManifest = nodefacts.KubernetesDir + "/kube-apiserver.yaml.stopped-by-homelab-drill"
)

// injector makes a failure and undoes it.
type injector interface {
	// fail makes the failure; notApplicable says why it cannot exist here
	// (nothing was done).
	fail(ctx context.Context, s *sampler) (notApplicable string, err error)
	restore(ctx context.Context, s *sampler) error
}

func injectorFor(o Options) injector {
	switch o.Failure.Kind {
	case impact.FailCut:
		return &cut{nodes: o.Failure.Nodes}
	case impact.FailKeepalived:
		return &keepalivedKill{nodes: o.Failure.Nodes}
	case impact.FailAPIServer:
		return &apiserverStop{nodes: o.Failure.Nodes}
	}
	return &powerOff{nodes: o.Failure.Nodes}
}

// powerOff pulls the plug: every process and address of the node gone.
type powerOff struct{ nodes []string }

func (p *powerOff) fail(ctx context.Context, s *sampler) (string, error) {
	for _, n := range p.nodes {
		if err := s.o.Lab.PowerOff(n); err != nil {
			return "", err
		}
		s.event("power-off " + n)
	}
	return "", nil
}

func (p *powerOff) restore(ctx context.Context, s *sampler) error {
	var errs []error
	for _, n := range p.nodes {
		if err := s.o.Lab.PowerOn(ctx, n); err != nil {
			errs = append(errs, err)
			continue
		}
		s.event("power-on " + n + " (booted)")
	}
	return errors.Join(errs...)
}

// cut pulls the network cable: the node runs on, alone.
type cut struct{ nodes []string }

func (c *cut) fail(ctx context.Context, s *sampler) (string, error) {
	for _, n := range c.nodes {
		if err := s.o.Lab.Cut(n); err != nil {
			return "", err
		}
		s.event("cut " + n + " off the network (link down, processes running)")
	}
	return "", nil
}

func (c *cut) restore(ctx context.Context, s *sampler) error {
	var errs []error
	for _, n := range c.nodes {
		if err := s.o.Lab.Uncut(n); err != nil {
			errs = append(errs, err)
			continue
		}
		s.event(n + " back on the network")
	}
	return errors.Join(errs...)
}

// keepalivedKill SIGKILLs every keepalived process of the node at once, as
// a crash or the OOM killer would end it: no goodbye advert (priority 0),
// no removal of the VIP; keepalived.service has no Restart=, so it stays
// dead. The restore starts it again, as an operator would.
type keepalivedKill struct {
	nodes  []string
	killed []string
}

func (k *keepalivedKill) fail(ctx context.Context, s *sampler) (string, error) {
	procs, err := s.o.Lab.Processes()
	if err != nil {
		return "", err
	}
	for _, n := range k.nodes {
		if !slices.Contains(procs[n], "keepalived") {
			return "no keepalived runs on " + n + " (the " + s.inv.Cluster.Endpoint.Layout + " layout has none)", nil
		}
	}
	for _, n := range k.nodes {
		if out, err := s.o.Lab.Run(ctx, n, "kill -KILL $(pidof keepalived)"); err != nil {
			return "", fmt.Errorf("%s: killing keepalived: %w: %s", n, err, out)
		}
		k.killed = append(k.killed, n)
		s.event("keepalived killed on " + n + " (SIGKILL)")
	}
	return "", waitPrograms(ctx, s, k.nodes, "keepalived", false, 10*time.Second)
}

func (k *keepalivedKill) restore(ctx context.Context, s *sampler) error {
	var errs []error
	for _, n := range k.killed {
		if out, err := s.o.Lab.Run(ctx, n, "systemctl start keepalived"); err != nil {
			errs = append(errs, fmt.Errorf("%s: starting keepalived: %w: %s", n, err, out))
			continue
		}
		s.event("keepalived started on " + n)
	}
	return errors.Join(errs...)
}

// apiserverStop stops the static pod as a user would: its manifest moved
// out of the kubelet's directory (the kubelet stops the pod), keepalived
// left running. The restore moves it back.
type apiserverStop struct {
	nodes  []string
	parked []string
}

func (a *apiserverStop) fail(ctx context.Context, s *sampler) (string, error) {
	for _, n := range a.nodes {
		if out, err := s.o.Lab.Run(ctx, n, fmt.Sprintf("test -f %s && mv %s %s", nodefacts.Manifest(nodefacts.KubeAPIServer), nodefacts.Manifest(nodefacts.KubeAPIServer), parkedManifest)); err != nil {
			return "", fmt.Errorf("%s: moving %s away: %w: %s", n, nodefacts.Manifest(nodefacts.KubeAPIServer), err, out)
		}
		a.parked = append(a.parked, n)
		s.event(fmt.Sprintf("%s: kube-apiserver.yaml moved out of the manifests", n))
	}
	// The failure takes effect when the kubelet stops the pod: the
	// apiserver then stops answering on its own address.
	deadline := time.Now().Add(time.Minute)
	for _, n := range a.nodes {
		node, _ := s.inv.Node(n)
		addr := net.JoinHostPort(node.Address, fmt.Sprint(s.inv.Cluster.Endpoint.Port))
		for s.p.readyz(ctx, nsDial(s.p.names.Node(n)), addr, 300*time.Millisecond) == nil {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return "", fmt.Errorf("%s: the apiserver still answers a minute after its manifest was moved", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	s.res.Effective = time.Since(s.start)
	s.event("kube-apiserver stops answering on " + strings.Join(a.nodes, ", "))
	return "", nil
}

func (a *apiserverStop) restore(ctx context.Context, s *sampler) error {
	var errs []error
	for _, n := range a.parked {
		if out, err := s.o.Lab.Run(ctx, n, fmt.Sprintf("mv %s %s", parkedManifest, nodefacts.Manifest(nodefacts.KubeAPIServer))); err != nil {
			errs = append(errs, fmt.Errorf("%s: moving %s back to %s: %w: %s", n, parkedManifest, nodefacts.Manifest(nodefacts.KubeAPIServer), err, out))
			continue
		}
		s.event(n + ": kube-apiserver.yaml back in the manifests")
	}
	a.parked = nil
	return errors.Join(errs...)
}

// waitPrograms waits until prog runs (running) or no longer runs on every
// node named.
func waitPrograms(ctx context.Context, s *sampler, nodes []string, prog string, running bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		procs, err := s.o.Lab.Processes()
		if err != nil {
			return err
		}
		done := true
		for _, n := range nodes {
			if slices.Contains(procs[n], prog) != running {
				done = false
			}
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s still %s on %v after %s", prog, map[bool]string{true: "not running", false: "running"}[running], nodes, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ParseFailure reads --fail and --how: one node or two (NODE1,NODE2), and
// power-off (or off), cut, keepalived or apiserver.
func ParseFailure(fail, how string) (impact.Failure, error) {
	kind := how
	if how == "power-off" {
		kind = impact.FailOff
	}
	if !slices.Contains(impact.Kinds, kind) {
		return impact.Failure{}, fmt.Errorf("--how %q: use power-off, cut, keepalived or apiserver", how)
	}
	var nodes []string
	for _, n := range strings.Split(fail, ",") {
		if n = strings.TrimSpace(n); n != "" {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 || len(nodes) > 2 {
		return impact.Failure{}, fmt.Errorf("--fail %q: name one node, or two as NODE1,NODE2", fail)
	}
	return impact.NewFailure(kind, nodes...), nil
}

// RunSettled runs a drill once the cluster is in the shape the drill
// starts from: a node restored by the previous drill may still be
// catching up, the VIP on its way back. It retries while Run finds the
// cluster not ready, for at most wait.
func RunSettled(ctx context.Context, o Options, wait time.Duration) (*Result, error) {
	deadline := time.Now().Add(wait)
	for {
		r, err := Run(ctx, o)
		var nr *ErrNotReady
		if !errors.As(err, &nr) || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
}
