// Package helmrelease installs, upgrades and rolls back one Helm release
// with the Helm Go SDK, against a cluster reached through any dialer (an
// SSH connection to a control-plane node, or the lab's namespace): the
// machine running homelab needs neither the helm binary nor a route to the
// API.
package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// DialFunc opens a connection to the API server's address.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Target is a cluster and the release in it.
type Target struct {
	// Kubeconfig is an admin kubeconfig (kubeadm's admin.conf).
	Kubeconfig []byte
	Dial       DialFunc
	Namespace  string
	Release    string
}

// Chart says where the chart comes from: a local archive (or chart
// directory) when Path is set, else RepoURL + Name at Version.
type Chart struct {
	Path    string
	RepoURL string
	Name    string
	Version string
}

func (c Chart) String() string {
	if c.Path != "" {
		return c.Path
	}
	return c.RepoURL + " " + c.Name + "@" + c.Version
}

// Load reads the chart. A repository chart is downloaded into Helm's cache;
// an offline machine gets an error naming the air-gapped alternative.
func (c Chart) Load() (*chart.Chart, error) {
	if c.Path != "" {
		ch, err := loader.Load(c.Path)
		if err != nil {
			return nil, fmt.Errorf("loading chart %s: %w", c.Path, err)
		}
		return ch, nil
	}
	opts := action.ChartPathOptions{RepoURL: c.RepoURL, Version: c.Version}
	path, err := opts.LocateChart(c.Name, cli.New())
	if err != nil {
		return nil, &FetchError{Chart: c, Err: err}
	}
	return loader.Load(path)
}

// FetchError: the chart repository could not be reached or did not serve
// the pinned version.
type FetchError struct {
	Chart Chart
	Err   error
}

func (e *FetchError) Error() string {
	return fmt.Sprintf("cannot fetch chart %s: %v; on an air-gapped homelab download the chart archive elsewhere (%s-%s.tgz) and set cluster.cilium.chart to its path",
		e.Chart, e.Err, e.Chart.Name, e.Chart.Version)
}

func (e *FetchError) Unwrap() error { return e.Err }

// Live is what the cluster holds for the release.
type Live struct {
	Present  bool
	Revision int
	Status   string
	Chart    string // name-version
	// Values are the values the release was given (not the chart's defaults).
	Values map[string]any
}

type getter struct {
	cfg       *rest.Config
	raw       clientcmd.ClientConfig
	discovery discovery.CachedDiscoveryInterface
}

func (g *getter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }
func (g *getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}
func (g *getter) ToRESTMapper() (meta.RESTMapper, error) {
	return restmapper.NewDeferredDiscoveryRESTMapper(g.discovery), nil
}
func (g *getter) ToRawKubeConfigLoader() clientcmd.ClientConfig { return g.raw }

// RESTConfig turns the kubeconfig into a client config whose connections
// go through dial.
func RESTConfig(kubeconfig []byte, dial DialFunc) (*rest.Config, clientcmd.ClientConfig, error) {
	api, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	raw := clientcmd.NewDefaultClientConfig(*api, &clientcmd.ConfigOverrides{})
	cfg, err := raw.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if dial != nil {
		cfg.Dial = dial
	}
	cfg.Timeout = 30 * time.Second
	return cfg, raw, nil
}

func configuration(t Target, logf func(string, ...any)) (*action.Configuration, error) {
	cfg, raw, err := RESTConfig(t.Kubeconfig, t.Dial)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	g := &getter{cfg: cfg, raw: raw, discovery: memory.NewMemCacheClient(dc)}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ac := new(action.Configuration)
	// Release records in Secrets, as the helm CLI keeps them: `helm list`
	// run by hand sees what homelab installed.
	if err := ac.Init(g, t.Namespace, "secret", logf); err != nil {
		return nil, err
	}
	return ac, nil
}

// Get reads the release's current revision.
func Get(ctx context.Context, t Target) (Live, error) {
	ac, err := configuration(t, nil)
	if err != nil {
		return Live{}, err
	}
	r, err := action.NewGet(ac).Run(t.Release)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return Live{}, nil
	}
	if err != nil {
		return Live{}, fmt.Errorf("reading release %s: %w", t.Release, err)
	}
	return live(r), nil
}

func live(r *release.Release) Live {
	l := Live{Present: true, Revision: r.Version, Values: r.Config}
	if r.Info != nil {
		l.Status = r.Info.Status.String()
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		l.Chart = r.Chart.Metadata.Name + "-" + r.Chart.Metadata.Version
	}
	if l.Values == nil {
		l.Values = map[string]any{}
	}
	return l
}

// ParseValues reads a values file.
func ParseValues(data []byte) (map[string]any, error) {
	v := map[string]any{}
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return v, nil
}

// Apply installs the release, or upgrades it to the chart and values, and
// waits for its resources to be ready. A failed upgrade is rolled back to
// the last good revision, so the cluster keeps a working dataplane; a
// failed first install is uninstalled.
func Apply(ctx context.Context, t Target, ch *chart.Chart, values map[string]any, timeout time.Duration, logf func(string, ...any)) (Live, error) {
	ac, err := configuration(t, logf)
	if err != nil {
		return Live{}, err
	}
	return apply(ctx, ac, t, ch, values, timeout)
}

func apply(ctx context.Context, ac *action.Configuration, t Target, ch *chart.Chart, values map[string]any, timeout time.Duration) (Live, error) {
	hist, err := action.NewHistory(ac).Run(t.Release)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return Live{}, fmt.Errorf("reading release %s: %w", t.Release, err)
	}
	good := lastDeployed(hist)
	if len(hist) > 0 && latest(hist).Info != nil && latest(hist).Info.Status.IsPending() {
		// An operation killed half-way (an up interrupted) leaves the
		// release pending, which blocks every later one: undo it first.
		if good == 0 {
			un := action.NewUninstall(ac)
			un.Wait, un.Timeout, un.IgnoreNotFound = true, timeout, true
			if _, err := un.Run(t.Release); err != nil {
				return Live{}, fmt.Errorf("removing %s's interrupted install: %w", t.Release, err)
			}
			hist = nil
		} else {
			rb := action.NewRollback(ac)
			rb.Version, rb.Wait, rb.Timeout, rb.MaxHistory = good, true, timeout, 10
			if err := rb.Run(t.Release); err != nil {
				return Live{}, fmt.Errorf("rolling %s's interrupted operation back to revision %d: %w", t.Release, good, err)
			}
		}
	}
	if len(hist) == 0 {
		in := action.NewInstall(ac)
		in.ReleaseName, in.Namespace = t.Release, t.Namespace
		in.Wait, in.Timeout, in.Atomic = true, timeout, true
		r, err := in.RunWithContext(ctx, ch, values)
		if err != nil {
			return Live{}, fmt.Errorf("installing %s: %w", t.Release, err)
		}
		if err := record(ctx, ac, r); err != nil {
			return Live{}, err
		}
		return live(r), nil
	}
	up := action.NewUpgrade(ac)
	up.Namespace = t.Namespace
	up.Wait, up.Timeout = true, timeout
	// The values are the whole desired set: a value dropped from the
	// inventory must go back to the chart's default, not linger.
	up.ResetValues = true
	up.MaxHistory = 10
	r, err := up.RunWithContext(ctx, t.Release, ch, values)
	if err != nil && r != nil && r.Info != nil && r.Info.Status == release.StatusDeployed {
		// The upgrade succeeded; only writing its record failed.
		err = nil
	}
	if err == nil {
		if err := record(ctx, ac, r); err != nil {
			return Live{}, err
		}
		return live(r), nil
	}
	if good == 0 {
		return Live{}, fmt.Errorf("upgrading %s (no earlier good revision to roll back to): %w", t.Release, err)
	}
	rb := action.NewRollback(ac)
	rb.Version, rb.Wait, rb.Timeout, rb.MaxHistory = good, true, timeout, 10
	if rbErr := rb.Run(t.Release); rbErr != nil {
		return Live{}, fmt.Errorf("upgrading %s: %w; rolling back to revision %d also failed: %v", t.Release, err, good, rbErr)
	}
	return Live{}, &RolledBackError{Release: t.Release, Revision: good, Err: err}
}

// recordWithin bounds how long record outlives an API that does not answer
// (a control plane restarting, a VIP moving).
var recordWithin = time.Minute

// record makes the stored revision say what Helm returned. Helm only logs
// a failed final write of an install ("failed to record the release") and
// returns one of an upgrade whose resources are already up; either leaves
// the stored revision pending while its resources run, and the next apply
// would take that for an interrupted operation and uninstall or roll back
// a working release.
func record(ctx context.Context, ac *action.Configuration, r *release.Release) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, recordWithin, true, func(context.Context) (bool, error) {
		stored, err := ac.Releases.Get(r.Name, r.Version)
		if err == nil && stored.Info != nil && stored.Info.Status == r.Info.Status {
			return true, nil
		}
		if err == nil {
			if err = ac.Releases.Update(r); err == nil {
				return true, nil
			}
		}
		last = err
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s revision %d is %s, but recording it failed for %s (%v): run up again once the API answers",
			r.Name, r.Version, r.Info.Status, recordWithin, last)
	}
	return nil
}

// RolledBackError: the upgrade failed and the release is back at Revision.
type RolledBackError struct {
	Release  string
	Revision int
	Err      error
}

func (e *RolledBackError) Error() string {
	return fmt.Sprintf("upgrading %s failed, rolled back to revision %d: %v", e.Release, e.Revision, e.Err)
}

func (e *RolledBackError) Unwrap() error { return e.Err }

func latest(hist []*release.Release) *release.Release {
	l := hist[0]
	for _, r := range hist {
		if r.Version > l.Version {
			l = r
		}
	}
	return l
}

func lastDeployed(hist []*release.Release) int {
	best := 0
	for _, r := range hist {
		if r.Info != nil && (r.Info.Status == release.StatusDeployed || r.Info.Status == release.StatusSuperseded) && r.Version > best {
			best = r.Version
		}
	}
	return best
}

// Uninstall removes the release; a missing release is not an error.
func Uninstall(ctx context.Context, t Target, timeout time.Duration) error {
	ac, err := configuration(t, nil)
	if err != nil {
		return err
	}
	un := action.NewUninstall(ac)
	un.Wait, un.Timeout, un.IgnoreNotFound = true, timeout, true
	_, err = un.Run(t.Release)
	return err
}

// LocalPath reports whether ref names a chart on this machine (an archive
// or a chart directory) rather than a repository chart.
func LocalPath(ref string) bool {
	if ref == "" {
		return false
	}
	if strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "~/") {
		return true
	}
	_, err := os.Stat(ref)
	return err == nil
}
