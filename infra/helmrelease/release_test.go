package helmrelease

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// fixture is a test chart (not Cilium): one ConfigMap of the values.
func fixture(version string) *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "homelab-test-fixture", Version: version},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fixture\ndata:\n  values: {{ toJson .Values | quote }}\n")}},
	}
}

// waitFailsOnce fails the next wait only, as a Cilium upgrade whose agents
// never come ready would, while the rollback's wait then succeeds.
type waitFailsOnce struct {
	*kubefake.FailingKubeClient
	fail bool
}

func (w *waitFailsOnce) Wait(r kube.ResourceList, d time.Duration) error {
	if w.fail {
		w.fail = false
		return errors.New("timed out waiting for the condition")
	}
	return nil
}

func fakeConfig(kube kube.Interface) *action.Configuration {
	return &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   kube,
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
}

var tgt = Target{Namespace: "kube-system", Release: "cilium"}

func TestApplyInstallsUpgradesAndRollsBack(t *testing.T) {
	ctx := context.Background()
	kc := &waitFailsOnce{FailingKubeClient: &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}}}
	ac := fakeConfig(kc)
	l, err := apply(ctx, ac, tgt, fixture("0.1.0"), map[string]any{"kubeProxyReplacement": true}, time.Second)
	if err != nil || l.Revision != 1 || l.Chart != "homelab-test-fixture-0.1.0" {
		t.Fatalf("install: %+v %v", l, err)
	}
	l, err = apply(ctx, ac, tgt, fixture("0.1.0"), map[string]any{"kubeProxyReplacement": false}, time.Second)
	if err != nil || l.Revision != 2 || l.Values["kubeProxyReplacement"] != false {
		t.Fatalf("upgrade: %+v %v", l, err)
	}

	// The next upgrade's wait fails: back to revision 2, deployed.
	kc.fail = true
	_, err = apply(ctx, ac, tgt, fixture("0.2.0"), map[string]any{"kubeProxyReplacement": true}, time.Second)
	var rb *RolledBackError
	if !errors.As(err, &rb) || rb.Revision != 2 {
		t.Fatalf("failed upgrade: %v", err)
	}
	cur, err := action.NewGet(ac).Run("cilium")
	if err != nil {
		t.Fatal(err)
	}
	if cur.Info.Status != release.StatusDeployed || cur.Chart.Metadata.Version != "0.1.0" || cur.Config["kubeProxyReplacement"] != false {
		t.Errorf("after rollback: revision %d %s chart %s values %v", cur.Version, cur.Info.Status, cur.Chart.Metadata.Version, cur.Config)
	}
}

func TestApplyFailedInstallLeavesNothing(t *testing.T) {
	ac := fakeConfig(&kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}, WaitError: errors.New("timed out")})
	if _, err := apply(context.Background(), ac, tgt, fixture("0.1.0"), nil, time.Second); err == nil {
		t.Fatal("install with a failing wait succeeded")
	}
	if hist, _ := action.NewHistory(ac).Run("cilium"); len(hist) != 0 {
		t.Errorf("a failed install left %d revisions", len(hist))
	}
}

// An up killed during an upgrade leaves the release pending-upgrade, which
// would block every later operation.
func TestApplyRecoversAnInterruptedUpgrade(t *testing.T) {
	ctx := context.Background()
	ac := fakeConfig(&kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}})
	if _, err := apply(ctx, ac, tgt, fixture("0.1.0"), nil, time.Second); err != nil {
		t.Fatal(err)
	}
	cur, _ := ac.Releases.Last("cilium")
	pending := *cur
	pending.Version, pending.Info = 2, &release.Info{Status: release.StatusPendingUpgrade}
	cur.Info.Status = release.StatusSuperseded
	if err := ac.Releases.Update(cur); err != nil {
		t.Fatal(err)
	}
	if err := ac.Releases.Create(&pending); err != nil {
		t.Fatal(err)
	}
	l, err := apply(ctx, ac, tgt, fixture("0.1.1"), nil, time.Second)
	if err != nil || l.Chart != "homelab-test-fixture-0.1.1" {
		t.Fatalf("upgrade after an interrupted one: %+v %v", l, err)
	}
}

func TestOfficialChartOfflineNamesTheAirGappedOption(t *testing.T) {
	t.Setenv("HELM_CACHE_HOME", t.TempDir())
	t.Setenv("HELM_CONFIG_HOME", t.TempDir())
	t.Setenv("HELM_DATA_HOME", t.TempDir())
	// A closed loopback port: nothing leaves the machine.
	_, err := Chart{RepoURL: "http://127.0.0.1:1", Name: "cilium", Version: "1.18.4"}.Load()
	var fe *FetchError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "cluster.cilium.chart") {
		t.Fatalf("offline fetch: %v", err)
	}
}

// updateFails fails the writes of records with status, n times, as an API
// that stops answering for a moment between Helm's wait and its last write.
// It keeps copies, as the Secrets driver does: the memory driver keeps
// Helm's own pointers, so a status set after a failed write would show.
type updateFails struct {
	driver.Driver
	status release.Status
	n      int
}

func copyOf(r *release.Release) *release.Release {
	c := *r
	if r.Info != nil {
		info := *r.Info
		c.Info = &info
	}
	return &c
}

func (u *updateFails) Create(key string, r *release.Release) error {
	return u.Driver.Create(key, copyOf(r))
}

func (u *updateFails) Update(key string, r *release.Release) error {
	if u.n > 0 && r.Info != nil && r.Info.Status == u.status {
		u.n--
		return errors.New("etcdserver: request timed out")
	}
	return u.Driver.Update(key, copyOf(r))
}

func (u *updateFails) Get(key string) (*release.Release, error) {
	r, err := u.Driver.Get(key)
	if err != nil {
		return nil, err
	}
	return copyOf(r), nil
}

func (u *updateFails) Query(labels map[string]string) ([]*release.Release, error) {
	rs, err := u.Driver.Query(labels)
	for i := range rs {
		rs[i] = copyOf(rs[i])
	}
	return rs, err
}

func (u *updateFails) List(filter func(*release.Release) bool) ([]*release.Release, error) {
	rs, err := u.Driver.List(filter)
	for i := range rs {
		rs[i] = copyOf(rs[i])
	}
	return rs, err
}

// Helm logs a failed final write and returns success: the stored revision
// stays pending-install, which the next apply would take for an interrupted
// install and uninstall. The write is retried until it lands.
func TestApplyRecordsTheReleaseHelmFailedToRecord(t *testing.T) {
	ctx := context.Background()
	d := &updateFails{Driver: driver.NewMemory(), status: release.StatusDeployed, n: 2}
	ac := fakeConfig(&kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}})
	ac.Releases = storage.Init(d)
	if _, err := apply(ctx, ac, tgt, fixture("0.1.0"), nil, time.Second); err != nil {
		t.Fatal(err)
	}
	if cur, _ := ac.Releases.Last("cilium"); cur.Version != 1 || cur.Info.Status != release.StatusDeployed {
		t.Fatalf("after an install whose record failed twice: revision %d %s", cur.Version, cur.Info.Status)
	}

	// An upgrade whose last write fails is a succeeded upgrade, not one to
	// roll back.
	d.n = 1
	l, err := apply(ctx, ac, tgt, fixture("0.1.1"), nil, time.Second)
	if err != nil || l.Revision != 2 || l.Chart != "homelab-test-fixture-0.1.1" {
		t.Fatalf("upgrade whose record failed once: %+v %v", l, err)
	}
	if cur, _ := ac.Releases.Last("cilium"); cur.Version != 2 || cur.Info.Status != release.StatusDeployed {
		t.Fatalf("after the upgrade: revision %d %s", cur.Version, cur.Info.Status)
	}

	// An API that never takes the write: a named error, not a success the
	// next apply would undo.
	defer func(w time.Duration) { recordWithin = w }(recordWithin)
	recordWithin = 3 * time.Second
	d.n = 1 << 30
	if _, err := apply(ctx, ac, tgt, fixture("0.1.2"), nil, time.Second); err == nil || !strings.Contains(err.Error(), "recording it failed") {
		t.Fatalf("upgrade whose record never lands: %v", err)
	}
}
