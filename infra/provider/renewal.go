package provider

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// Certificates over the years: kubeadm's leaves last a year and nothing
// renews them unless an upgrade happens to. ControlPlaneAddress, which
// already re-issues certificates whose SANs are wrong, re-issues those
// about to expire the same way, one control-plane node at a time.

// EnvRenewCertificates asks for every certificate on the named
// control-plane nodes (comma-separated, * for all) to be renewed whatever
// its dates: after a key leak, or to rehearse. Like consent it lives in
// the environment of one run, never in the stack's config, so the next up
// is a no-op again: `homelab up --renew-certificates` sets it for that up
// alone; with the Pulumi CLI it is HOMELAB_RENEW_CERTIFICATES='*' pulumi up.
const EnvRenewCertificates = envvars.RenewCertificates

// renewalAsked reports whether this run asks for node's certificates to
// be renewed whatever their dates.
func renewalAsked(ctx context.Context, node string) bool { return configOf(ctx).renew.has(node) }

// renewal is one certificate up issues again on a node, and why.
type renewal struct {
	// Name is nodefacts.Renewable's (apiserver.crt, admin.conf).
	Name     string
	NotAfter time.Time
	Why      string
}

func (r renewal) String() string { return r.Name + " " + r.Why }

// renewalsDue lists, by name, the certificates that expire within
// renewBefore of now, expired ones included: those the next up must not
// leave as they are.
func renewalsDue(expiries map[string]time.Time, now time.Time, renewBefore time.Duration) []renewal {
	var out []renewal
	for _, name := range slices.Sorted(maps.Keys(expiries)) {
		at := expiries[name]
		left := at.Sub(now)
		switch {
		case left <= 0:
			out = append(out, renewal{name, at, fmt.Sprintf("expired %s (%s ago)", stamp(at), roundLeft(-left))})
		case left <= renewBefore:
			out = append(out, renewal{name, at, fmt.Sprintf("expires %s (in %s, within renewBefore %s)", stamp(at), roundLeft(left), renewBefore)})
		}
	}
	return out
}

// renewalsAll is every certificate, renewed because the run asks for it.
func renewalsAll(expiries map[string]time.Time) []renewal {
	var out []renewal
	for _, name := range slices.Sorted(maps.Keys(expiries)) {
		at := expiries[name]
		out = append(out, renewal{name, at, fmt.Sprintf("valid until %s, renewal asked for (--renew-certificates)", stamp(at))})
	}
	return out
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }

// roundLeft says a duration in days once it is more than two.
func roundLeft(d time.Duration) string {
	if d > 48*time.Hour {
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	return d.Round(time.Second).String()
}

// renewBefore is the declared renewal window; kubeadm's users' default
// when a stack made before it was declared has none.
func (in ControlPlaneAddressArgs) renewBefore() time.Duration {
	if d, err := time.ParseDuration(in.RenewBefore); err == nil && d > 0 {
		return d
	}
	d, _ := time.ParseDuration(inventory.DefaultRenewBefore)
	return d
}

// renewalsOf is what converging the node renews, from its last read
// expiries: every certificate when the run asks for it, else those due.
func renewalsOf(in ControlPlaneAddressArgs, st ControlPlaneAddressState, now time.Time, asked bool) []renewal {
	exp := expiryTimes(st.LiveExpiry)
	if asked {
		return renewalsAll(exp)
	}
	return renewalsDue(exp, now, in.renewBefore())
}

// liveExpiryOf keeps, by name, the NotAfter of each renewable certificate
// the expiry probe found, as the state records it.
func liveExpiryOf(list []nodefacts.Expiry) map[string]string {
	out := map[string]string{}
	for _, e := range list {
		if r, ok := nodefacts.RenewableOf(e.Path); ok {
			out[r.Name()] = e.NotAfter.UTC().Format(time.RFC3339)
		}
	}
	return out
}

func expiryTimes(live map[string]string) map[string]time.Time {
	out := map[string]time.Time{}
	for name, v := range live {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			out[name] = t
		}
	}
	return out
}

// expiryKey is the detailed diff's path of a certificate renewal, into
// the state's liveExpiry: the preview names the certificate, and its old
// value is the date that makes it due.
func expiryKey(name string) string { return `liveExpiry["` + name + `"]` }

// renewedCerts splits renewals by how they are issued again: certificate
// files (relative to PKIDir, as regenerateCerts takes them) and
// kubeconfigs (by file name, as `kubeadm certs renew` takes them), and
// names the static pods that must restart to read theirs.
func renewedCerts(due []renewal) (certs, kubeconfigs, restart []string) {
	for _, r := range due {
		rn, ok := nodefacts.RenewableNamed(r.Name)
		switch {
		case !ok:
			continue
		case rn.Kubeconfig():
			kubeconfigs = append(kubeconfigs, r.Name)
		default:
			certs = append(certs, r.Name)
		}
		if rn.RestartPod != "" && !slices.Contains(restart, rn.RestartPod) {
			restart = append(restart, rn.RestartPod)
		}
	}
	return certs, kubeconfigs, restart
}

// renewKubeconfigs renews each kubeconfig's embedded client certificate
// in place: the file is never missing (`kubeadm init phase kubeconfig`
// keeps an existing file whatever its expiry, so it would have to be
// deleted first, and admin.conf is how the cluster is reached), and its
// server, which the address fix owns, stays as it is. --config: the
// lifetime is the declared one, and nothing is asked of the API, which
// may be down.
func renewKubeconfigs(config string, names []string) scripts.Script {
	return scripts.Render("certs/renew-kubeconfigs", renewKubeconfigsArgs{Config: config, Names: names})
}

type renewKubeconfigsArgs struct {
	Config string
	Names  []string
}

// podArgs name a static pod and the pattern its process is matched by
// (nodefacts.ProcessPattern), for the pods/ scripts.
type podArgs struct{ Name, Pattern string }

func podOf(pod string) podArgs { return podArgs{Name: pod, Pattern: nodefacts.ProcessPattern(pod)} }

// restartArgs are pods/restart's: the pods restarted, in order.
type restartArgs struct{ Pods []podArgs }

func restartArgsOf(pods []string) restartArgs {
	var a restartArgs
	for _, pod := range pods {
		a.Pods = append(a.Pods, podOf(pod))
	}
	return a
}

// restartPods makes the kubelet restart each static pod and waits for a
// new process of it.
func restartPods(pods []string) scripts.Script {
	return scripts.Render("pods/restart", restartArgsOf(pods))
}

type regenerateArgs struct {
	podArgs
	Phase, Config string
}

// regeneratePod writes a static pod's manifest again with kubeadm and
// waits until the kubelet runs the new one.
func regeneratePod(pod, config string) scripts.Script {
	return scripts.Render("pods/regenerate", regenerateArgs{podArgs: podOf(pod), Phase: nodefacts.ComponentPhase[pod], Config: config})
}

// notRenewed says which renewals the node's certificates do not show:
// each must be another certificate than before (its serial: a renewal
// asked for right after the last may end the same second), valid beyond
// renewBefore.
func notRenewed(due []renewal, before, after []nodefacts.Expiry, now time.Time, renewBefore time.Duration) []string {
	byName := func(list []nodefacts.Expiry) map[string]nodefacts.Expiry {
		m := map[string]nodefacts.Expiry{}
		for _, e := range list {
			if r, ok := nodefacts.RenewableOf(e.Path); ok {
				m[r.Name()] = e
			}
		}
		return m
	}
	was, is := byName(before), byName(after)
	var out []string
	for _, r := range due {
		e, ok := is[r.Name]
		switch {
		case !ok:
			out = append(out, r.Name+" is gone")
		case e.Serial == was[r.Name].Serial:
			out = append(out, fmt.Sprintf("%s was not renewed (valid until %s)", r.Name, stamp(e.NotAfter)))
		case e.NotAfter.Sub(now) <= renewBefore:
			out = append(out, fmt.Sprintf("%s was renewed only until %s, within renewBefore %s: the node's kubeadm config declares a shorter validity", r.Name, stamp(e.NotAfter), renewBefore))
		}
	}
	return out
}

// issueAgain re-issues certificate files (relative to PKIDir) by their
// phases and renews kubeconfigs' client certificates in place, from the
// node's kubeadm config: nothing of it needs the API.
func issueAgain(ctx context.Context, c ssh.Executor, node, config string, certs, kubeconfigs []string) error {
	if len(certs) > 0 {
		if _, err := mustFinish(ctx, c, node, "issuing "+strings.Join(certs, ", "), regenerateCerts(config, certs)); err != nil {
			return err
		}
	}
	if len(kubeconfigs) > 0 {
		if _, err := mustFinish(ctx, c, node, "renewing the client certificates of "+strings.Join(kubeconfigs, ", "), renewKubeconfigs(config, kubeconfigs)); err != nil {
			return err
		}
	}
	return nil
}

// issueArgs are certs/issue's: the CAs (Name relative to PKIDir, Dir its
// directory in the staging one) and the certificates (Base, their path
// relative to PKIDir without .crt, issued by Phase).
type issueArgs struct {
	PKIDir, Config string
	CAs            []struct{ Name, Dir string }
	Certs          []struct{ Phase, Base string }
}

// regenerateCerts issues new certificates with kubeadm in a staging
// directory holding only the CAs they need (kubeadm keeps an existing
// certificate whatever its SANs and dates, so it must not see the old
// ones), then moves each pair into place. The running etcd and apiserver
// never find a certificate missing: both reload theirs from the files by
// themselves. certs are relative to PKIDir.
func regenerateCerts(config string, certs []string) scripts.Script {
	a := issueArgs{PKIDir: nodefacts.PKIDir, Config: config}
	var cas []string
	for _, f := range certs {
		if r, ok := nodefacts.RenewableNamed(f); ok && !slices.Contains(cas, r.CA) {
			cas = append(cas, r.CA)
			a.CAs = append(a.CAs, struct{ Name, Dir string }{r.CA, strings.TrimSuffix(path.Dir(r.CA), ".")})
		}
	}
	for _, f := range certs {
		r, _ := nodefacts.RenewableNamed(f)
		a.Certs = append(a.Certs, struct{ Phase, Base string }{r.Phase, strings.TrimSuffix(f, ".crt")})
	}
	return scripts.Render("certs/issue", a)
}
