package stack

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	ggcr "github.com/google/go-containerregistry/pkg/registry"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/images"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

// runtimeRow is doctor's runtime row for node.
func runtimeRow(rep *doctor.Report, node string) (doctor.Finding, bool) {
	return doctorRow(rep, "runtime", node)
}

// doctorRow is doctor's check row for node.
func doctorRow(rep *doctor.Report, check, node string) (doctor.Finding, bool) {
	for _, f := range rep.Findings {
		if f.Check == check && f.Where == node {
			return f, true
		}
	}
	return doctor.Finding{}, false
}

// TestRuntimeCgroupDriverInTheLab is the mismatch that breaks most
// hand-built kubeadm nodes, on real nodes. The nodes boot with Debian's
// packaged config.toml (runc on cgroupfs, no sandbox image, no mirrors),
// and up alone makes them working nodes (cluster.containerRuntime.manage).
// Then the worker's containerd is put back to cgroupfs while kubeadm gave
// the kubelet systemd: doctor fails naming both drivers and the fix, and
// a pod's container lands outside the kubelet's cgroups. The next up
// rewrites the configuration and restarts containerd; doctor passes
// again and a pod runs inside the kubelet's cgroups. Then, on the same
// cluster, its only copy of etcd's data kept (checkOnlyCopy).
func TestRuntimeCgroupDriverInTheLab(t *testing.T) {
	needE2E(t)
	e := newE2EWith(t, soloRealInventory, "*")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// Its state in the lab's S3 bucket, shared with a second operator
	// below (upWithSecondOperator).
	e.useLabS3(ctx)
	const config = containerd.ConfigPath
	if out := e.node(ctx, "w1", "grep -c SystemdCgroup "+config+" || true"); strings.TrimSpace(out) != "0" {
		t.Fatalf("w1 does not boot with Debian's packaged %s (runc's cgroup driver unset): %q", config, out)
	}
	// Left to the user (manage: false), that containerd is refused before
	// kubeadm runs, naming the node, the file and the fix; nothing is
	// written to the nodes.
	// solo's containerd is stopped: one that does not answer on its
	// socket is refused too, naming the node and how to start it.
	e.node(ctx, "solo", "systemctl stop containerd")
	unmanaged := e.open(ctx, e.inventory("unmanaged", unmanageRuntime))
	_, err := unmanaged.Up(ctx, true)
	if err == nil || !strings.Contains(err.Error(), "w1") || !strings.Contains(err.Error(), "cgroupfs") ||
		!strings.Contains(err.Error(), "SystemdCgroup = true") || !strings.Contains(err.Error(), "cluster.containerRuntime.manage: true") {
		t.Errorf("up with Debian's containerd left to the user: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "solo") || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), "systemctl enable --now containerd") {
		t.Errorf("up with solo's containerd stopped: %v", err)
	}
	e.node(ctx, "solo", "systemctl start containerd")
	for _, n := range []string{"solo", "w1"} {
		if out := e.node(ctx, n, "ls /etc/kubernetes/kubeadm 2>/dev/null | wc -l; grep -c SystemdCgroup "+config+" || true"); strings.Fields(out)[0] != "0" || strings.Fields(out)[1] != "0" {
			t.Errorf("%s was written to by the refused up: %q", n, out)
		}
	}

	// A node without a runtime: w1's containerd and runc purged, as on a
	// machine where none was installed. The inventory pins both at the
	// versions solo runs (Debian 12's), and up installs them on w1 from
	// its apt source (the lab's copy of Debian's mirror), holds them on
	// both nodes, and writes config.toml over the package's.
	pins := strings.Fields(e.node(ctx, "solo", `dpkg-query -W -f='${Version}\n' containerd runc`))
	if len(pins) != 2 {
		t.Fatalf("solo's containerd and runc versions: %q", pins)
	}
	e.node(ctx, "w1", "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q containerd runc >/dev/null && ! command -v containerd")
	// Without pins, up configures the containerd a node has and installs
	// none: w1 is refused before anything is written to it, naming both
	// ways to get one (before, it got its config.toml and failed at
	// containerd's restart).
	const files = "find /etc/containerd /etc/kubernetes -type f 2>/dev/null | sort"
	before := e.node(ctx, "w1", files)
	bare := e.open(ctx, e.inventory("unpinned", func(inv string) string { return inv }))
	if _, err := bare.Up(ctx, true); err == nil || !strings.Contains(err.Error(), "w1") || !strings.Contains(err.Error(), "lacks containerd") ||
		!strings.Contains(err.Error(), "cluster.containerRuntime.packages") {
		t.Errorf("up without pins on w1 without containerd: %v", err)
	}
	if after := e.node(ctx, "w1", files); after != before {
		t.Errorf("w1 was written to by the refused up: its files were\n%s\nand are\n%s", before, after)
	}
	// From here on, solo also snapshots etcd every 30 s and copies each
	// snapshot to the lab's bucket (checkOffsiteSnapshots, below).
	s := e.open(ctx, e.inventory("pinned", func(inv string) string { return e.offsite(pinRuntime(inv, pins[0], pins[1])) }))
	start := time.Now()
	e.up(ctx, s)
	t.Logf("figures: up installing w1's runtime: %s", time.Since(start).Round(100*time.Millisecond))
	for _, n := range []string{"solo", "w1"} {
		want := fmt.Sprintf("containerd %s\nruntime %s\nheld containerd runc", pins[0], pins[1])
		got := e.node(ctx, n, `echo "containerd $(dpkg-query -W -f='${Version}' containerd)"; echo "runtime $(dpkg-query -W -f='${Version}' runc)"; echo "held $(apt-mark showhold containerd runc | sort | tr '\n' ' ')"`)
		if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(want), " ") {
			t.Errorf("%s's runtime packages: %q, want %q", n, got, want)
		}
	}
	if out := e.node(ctx, "w1", "systemctl is-active containerd; grep -c 'SystemdCgroup = true' "+config); strings.Fields(out)[0] != "active" || strings.Fields(out)[1] == "0" {
		t.Errorf("w1's installed containerd: %q", out)
	}
	e.verify(ctx, s)
	// The inventory's mirror (the lab's registry) is where up sent every
	// pull, Docker Hub's included, which the lab itself does not mirror.
	if out := e.node(ctx, "w1", "cat "+containerd.HostsPath("docker.io")); !strings.Contains(out, "10.77.0.1:5000") {
		t.Errorf("w1's docker.io mirror: %q", out)
	}
	checkImagesMirror(ctx, t, e, s.Inv)
	rep := e.doctor(ctx, s.Inv, s.Bundle)
	if f, ok := runtimeRow(rep, "w1"); !ok || f.Status != doctor.OK || !strings.Contains(f.Detail, "systemd") {
		t.Fatalf("doctor's runtime row for w1 on a working node: %+v (found %v)", f, ok)
	}
	if f, ok := doctorRow(rep, "mirror", "w1"); !ok || f.Status != doctor.OK || !strings.Contains(f.Detail, "docker.io, nvcr.io, quay.io, registry.k8s.io go to http://10.77.0.1:5000") {
		t.Errorf("doctor's mirror row for w1: %+v (found %v)", f, ok)
	}
	// Debian 12's containerd runs the kubelet of the lab's v1.34, but
	// containerd tests that minor from 1.6.39: a warning, from up (on
	// the real node's own containerd --version) and doctor alike.
	if f, ok := doctorRow(rep, "runtime version", "w1"); !ok || f.Status != doctor.Warn || !strings.Contains(f.Detail, "1.6.20") {
		t.Errorf("doctor's runtime version row for w1 on Debian 12's containerd: %+v (found %v)", f, ok)
	}
	if !causesMention(rep, "w1", "1.6.39") {
		t.Errorf("doctor does not say which containerd is tested with v1.34: %v", rep.Causes)
	}
	// Pinned, the version is judged as the inventory gives it.
	if !strings.Contains(e.log.String(), "cluster.containerRuntime.packages.containerd") || !strings.Contains(e.log.String(), "containerd tests Kubernetes v1.34 with") {
		t.Errorf("up did not warn about the pinned containerd 1.6.20 under v1.34:\n%s", tail(e.log.String(), 40))
	}

	// A changed runtime configuration (restrictOOMScoreAdj turned off,
	// then on again: every node's config.toml changes twice) restarts
	// containerd one node at a time, the control-plane node first, and
	// the API answers through the endpoint throughout: containers
	// outlive containerd's restarts.
	off := e.open(ctx, e.inventory("oom-unrestricted", func(inv string) string {
		return e.offsite(pinRuntime(strings.Replace(inv, "restrictOOMScoreAdj: true", "restrictOOMScoreAdj: false", 1), pins[0], pins[1]))
	}))
	for _, step := range []*Stack{off, s} {
		e.rollingRestart(ctx, step, []string{"solo", "w1"})
	}

	// Docker Hub's mirror file goes too: doctor names the registry that
	// no longer goes to its mirror.
	e.node(ctx, "w1", "sed -i 's/SystemdCgroup = true/SystemdCgroup = false/' "+config+" && rm "+containerd.HostsPath("docker.io")+" && systemctl restart containerd")
	rep = e.doctor(ctx, s.Inv, s.Bundle)
	if f, ok := doctorRow(rep, "mirror", "w1"); !ok || f.Status != doctor.Fail || !strings.Contains(f.Detail, "pulls of docker.io go to docker.io itself") {
		t.Errorf("doctor's mirror row for w1 without its docker.io hosts.toml: %+v (found %v)", f, ok)
	}
	f, ok := runtimeRow(rep, "w1")
	if !ok || f.Status != doctor.Fail || !strings.Contains(f.Detail, "cgroupfs") {
		t.Errorf("doctor's runtime row for w1 on cgroupfs: %+v (found %v)", f, ok)
	}
	if !causesMention(rep, "w1", "SystemdCgroup = true", "restart containerd") {
		t.Errorf("doctor does not name w1's mismatch and its fix: %v", rep.Causes)
	}
	// The real containerd 1.6 still starts the pod (measured: it turns
	// Ready), but runc puts its container in a cgroup of its own making,
	// outside the kubelet's kubepods.slice: the kubelet's QoS limits and
	// evictions no longer hold it.
	const pod = labKubectl + "run cgroup-probe --image=registry.k8s.io/pause:3.10.1 --restart=Never --overrides='{\"spec\":{\"nodeName\":\"w1\"}}'"
	e.node(ctx, "solo", pod)
	out, err := e.lab.Run(ctx, "solo", labKubectl+"wait --for=condition=Ready pod/cgroup-probe --timeout=60s")
	t.Logf("figures: a pod on w1 with containerd on cgroupfs: ready=%v %s", err == nil, strings.TrimSpace(out))
	if err == nil {
		if cg := e.probeCgroup(ctx); strings.HasPrefix(cg, "/kubepods.slice/") {
			t.Errorf("the pod's container is in the kubelet's cgroup %s with containerd on cgroupfs", cg)
		}
	}
	e.node(ctx, "solo", labKubectl+"delete pod cgroup-probe --wait=true")

	// up repairs it: the file is drift, and containerd restarts on it.
	start = time.Now()
	e.up(ctx, s)
	t.Logf("figures: up repairing w1's containerd configuration: %s", time.Since(start).Round(100*time.Millisecond))
	if out := e.node(ctx, "w1", "grep -c 'SystemdCgroup = true' "+config+" || true"); strings.TrimSpace(out) == "0" {
		t.Errorf("up left w1's %s on cgroupfs", config)
	}
	rep = e.doctor(ctx, s.Inv, s.Bundle)
	if f, ok := runtimeRow(rep, "w1"); !ok || f.Status != doctor.OK {
		t.Errorf("doctor's runtime row for w1 after up: %+v (found %v)", f, ok)
	}
	if f, ok := doctorRow(rep, "mirror", "w1"); !ok || f.Status != doctor.OK {
		t.Errorf("doctor's mirror row for w1 after up: %+v (found %v)", f, ok)
	}
	e.node(ctx, "solo", pod)
	if out, err := e.lab.Run(ctx, "solo", labKubectl+"wait --for=condition=Ready pod/cgroup-probe --timeout=120s"); err != nil {
		t.Fatalf("a pod on w1 with containerd on systemd cgroups: %v %s\n%s", err, out, e.node(ctx, "solo", labKubectl+"describe pod cgroup-probe | tail -n 8"))
	}
	if cg := e.probeCgroup(ctx); !strings.HasPrefix(cg, "/kubepods.slice/") {
		t.Errorf("the pod's container is in %q with containerd on systemd cgroups, want the kubelet's kubepods.slice", cg)
	}

	// An edit containerd has not read: the file is right, the daemon may
	// not be. doctor warns; up puts the file back and restarts containerd.
	e.node(ctx, "w1", "echo '# edited by hand' >> "+config)
	rep = e.doctor(ctx, s.Inv, s.Bundle)
	if f, ok := runtimeRow(rep, "w1"); !ok || f.Status != doctor.Warn || !causesMention(rep, "w1", config, "systemctl restart containerd") {
		t.Errorf("doctor's runtime row for w1 with %s edited after containerd started: %+v (found %v), causes %v", config, f, ok, rep.Causes)
	}
	e.upWithSecondOperator(ctx, s)
	if f, ok := runtimeRow(e.doctor(ctx, s.Inv, s.Bundle), "w1"); !ok || f.Status != doctor.OK {
		t.Errorf("doctor's runtime row for w1 after up put the file back: %+v (found %v)", f, ok)
	}
	e.checkOffsiteSnapshots(ctx, s, "solo")

	// containerd 2, the way to Kubernetes v1.36: Docker's containerd.io
	// from the lab's stand-in for Docker's repository (containerd 2.2.9
	// built from its module, Debian's runc) takes the place of Debian's
	// held containerd and runc on both nodes, one after the other, and up
	// writes containerd 2's configuration (config version 3) over the one
	// Docker ships, which disables the CRI. The real kubelet then runs a
	// pod on it, in its own cgroups.
	st, err := e.lab.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	dockerInv := e.inventory("containerd.io", func(inv string) string {
		return dockerRuntime(inv, lab.DockerRepository(st), lab.DistributionSuite, e.lab.AptKeyringPath())
	})
	docker := e.open(ctx, dockerInv)
	start = time.Now()
	e.up(ctx, docker)
	t.Logf("figures: up moving both nodes to containerd.io: %s", time.Since(start).Round(100*time.Millisecond))
	// Its inventory schedules no snapshots: the timer is gone, and so is
	// the file holding the bucket's keys; rclone stays installed.
	if out := e.node(ctx, "solo", "systemctl is-enabled "+etcdsnapshot.Timer+" 2>&1; ls "+etcdsnapshot.RcloneConfigPath+" 2>&1; command -v rclone"); slices.Contains(strings.Split(out, "\n"), "enabled") ||
		!strings.Contains(out, "No such file") || !strings.Contains(out, "/usr/bin/rclone") {
		t.Errorf("solo after snapshots were taken out of the inventory: %q", out)
	}
	for _, n := range []string{"solo", "w1"} {
		got := e.node(ctx, n, `containerd --version; dpkg-query -W -f='${db:Status-Abbrev}${Version}\n' containerd.io; head -c 400 `+config+` | grep -c '^version = 3' || true`)
		if !strings.Contains(got, "v2.2.9") || !strings.Contains(got, "hi 2.2.9-1") || !strings.HasSuffix(strings.TrimSpace(got), "1") {
			t.Errorf("%s after containerd.io: %q, want containerd v2.2.9, containerd.io held, config version 3", n, got)
		}
	}
	e.verify(ctx, docker)
	rep = e.doctor(ctx, docker.Inv, docker.Bundle)
	if f, ok := runtimeRow(rep, "w1"); !ok || f.Status != doctor.OK || !strings.Contains(f.Detail, "2.2.9") {
		t.Errorf("doctor's runtime row for w1 on containerd 2: %+v (found %v)", f, ok)
	}
	e.node(ctx, "solo", labKubectl+"delete pod cgroup-probe --wait=true")
	e.node(ctx, "solo", pod)
	if out, err := e.lab.Run(ctx, "solo", labKubectl+"wait --for=condition=Ready pod/cgroup-probe --timeout=120s"); err != nil {
		t.Fatalf("a pod on w1 with containerd 2: %v %s\n%s", err, out, e.node(ctx, "solo", labKubectl+"describe pod cgroup-probe | tail -n 8"))
	}
	if cg := e.probeCgroup(ctx); !strings.HasPrefix(cg, "/kubepods.slice/") {
		t.Errorf("the pod's container is in %q on containerd 2, want the kubelet's kubepods.slice", cg)
	}
	e.node(ctx, "solo", labKubectl+"delete pod cgroup-probe --wait=true")

	// The cluster is working and as the inventory says: its only copy of
	// etcd's data kept, rather than on a build of its own.
	onlyCopy := time.Now()
	e.checkOnlyCopy(ctx, t, dockerInv)
	t.Logf("figures: the only-copy part %s", time.Since(onlyCopy).Round(time.Second))
}

// dockerRuntime takes the runtime from Docker's repository (url, suite,
// signed by the key in keyring) at containerd 2.2.9 in an
// inventory/lab.yaml variant.
func dockerRuntime(inv, url, suite, keyring string) string {
	return pinRuntimeWith(inv, "packages: {containerd: \"2.2.9-1\", repository: {url: \""+url+"\", suite: "+suite+", keyring: \""+keyring+"\"}}")
}

// unmanageRuntime leaves containerd's configuration to the user in an
// inventory/lab.yaml variant.
// rollingRestart runs an up that changes every node's containerd
// configuration, with the API watched through the endpoint, and checks
// that each node's containerd restarted, in the order of nodes, and that
// no probe failed.
func (e *e2e) rollingRestart(ctx context.Context, s *Stack, nodes []string) {
	t := e.t
	started := func() map[string]string {
		m := map[string]string{}
		for _, n := range nodes {
			m[n] = strings.TrimSpace(e.node(ctx, n, "systemctl show -p ActiveEnterTimestampMonotonic --value containerd"))
		}
		return m
	}
	before := started()
	e.mutating()
	w := e.watch(ctx, s.Bundle, s.Inv.EndpointHost(), []string{"https://" + s.Inv.EndpointHost() + ":2379"})
	start := time.Now()
	e.up(ctx, s)
	w.end()
	t.Logf("figures: up restarting containerd node by node: %s; %s", time.Since(start).Round(100*time.Millisecond), w)
	if w.apiFail > 0 || w.etcdFail > 0 {
		t.Errorf("the API or etcd failed while containerd restarted: %s", w)
	}
	var order []string
	for _, l := range e.mutating() {
		node, cmd, _ := strings.Cut(l, ": ")
		if strings.Contains(cmd, "systemctl restart") && strings.Contains(cmd, "containerd") && !slices.Contains(order, node) {
			order = append(order, node)
		}
	}
	if !slices.Equal(order, nodes) {
		t.Errorf("containerd restarted on %v, want %v in that order", order, nodes)
	}
	after := started()
	for _, n := range nodes {
		if after[n] == before[n] {
			t.Errorf("%s's containerd did not restart on its changed configuration (started at %s)", n, after[n])
		}
	}
}

// pinRuntime pins the runtime's packages in inventory/lab.yaml's
// containerRuntime.
func pinRuntime(inv, containerd, runc string) string {
	return pinRuntimeWith(inv, "packages: {containerd: \""+containerd+"\", runc: \""+runc+"\"}")
}

// pinRuntimeWith adds packages (a YAML line) to inventory/lab.yaml's
// containerRuntime.
func pinRuntimeWith(inv, packages string) string {
	re := regexp.MustCompile(`(containerRuntime:[^\n]*\n)`)
	out := re.ReplaceAllString(inv, "${1}    "+packages+"\n")
	if out == inv {
		panic("inventory/lab.yaml has no cluster.containerRuntime to pin")
	}
	return out
}

func unmanageRuntime(inv string) string {
	re := regexp.MustCompile(`(containerRuntime:[^\n]*\n\s+manage: )true`)
	out := re.ReplaceAllString(inv, "${1}false")
	if out == inv {
		panic("inventory/lab.yaml has no cluster.containerRuntime.manage: true to turn off")
	}
	return out
}

// probeCgroup is the memory cgroup of the cgroup-probe pod's container on
// w1, as its process sees it.
func (e *e2e) probeCgroup(ctx context.Context) string {
	// ctr 2.x warns about cgroup v1 on stderr; a deleted pod's container
	// may still be listed: the probe's is the one whose task runs.
	ids := strings.Fields(e.node(ctx, "w1", `ctr --namespace k8s.io containers ls --quiet 'labels."io.kubernetes.container.name"==cgroup-probe' 2>/dev/null`))
	var id, pid string
	for _, line := range strings.Split(e.node(ctx, "w1", "ctr --namespace k8s.io task ls 2>/dev/null"), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "RUNNING" && slices.Contains(ids, f[0]) {
			id, pid = f[0], f[1]
		}
	}
	if pid == "" {
		e.t.Errorf("no running task of the cgroup-probe containers %v on w1", ids)
		return ""
	}
	cg := strings.TrimSpace(e.node(ctx, "w1", "awk -F: '$2 == \"memory\" { print $3 }' /proc/"+pid+"/cgroup"))
	e.t.Logf("figures: the pod's container %.12s, pid %s, memory cgroup %s", id, pid, cg)
	return cg
}

// checkImagesMirror fills an empty registry (on loopback, in this
// process: nothing outside the lab is reached) from the OCI layouts the
// lab built its registry from, as `homelab images mirror --from-layout`
// does for a user carrying images into an air-gapped homelab. Every image
// `homelab images list` names must be there: the list and what the
// cluster that just came up pulled are the same set.
func checkImagesMirror(ctx context.Context, t *testing.T, e *e2e, inv *inventory.Inventory) {
	t.Helper()
	layouts, err := e.lab.RegistryLayouts()
	if err != nil {
		t.Fatal(err)
	}
	imgs, warnings, err := images.List(inv, images.ListOptions{})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("images list of the lab's inventory: %v (warnings %v)", err, warnings)
	}
	srv := httptest.NewServer(ggcr.New(ggcr.WithBlobHandler(ggcr.NewDiskBlobHandler(t.TempDir())), ggcr.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	to := map[string]string{}
	for _, img := range imgs {
		host, err := images.RegistryOf(img.Ref)
		if err != nil {
			t.Fatal(err)
		}
		to[host] = srv.URL
	}
	start := time.Now()
	res, err := images.Mirror(ctx, imgs, images.Source{Layouts: layouts}, to, func(string, ...any) {})
	if err != nil || res.Copied != len(imgs) {
		t.Errorf("images mirror from the lab's layouts: %+v of %d: %v", res, len(imgs), err)
	}
	t.Logf("figures: images mirror copied %d images from %d layouts in %s", res.Copied, len(layouts), time.Since(start).Round(100*time.Millisecond))
}
