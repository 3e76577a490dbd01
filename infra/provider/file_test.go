package provider

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/infra/scripts/shell"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/netplan"
)

// refresh is a Read as a refresh runs it.
func refresh[I, O any](t *testing.T, ctx context.Context, r infer.CustomRead[I, O], in I, st O) O {
	t.Helper()
	resp, err := r.Read(ctx, infer.ReadRequest[I, O]{ID: "id", Inputs: in, State: st})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return resp.State
}

// diffKeys are the properties a preview would show as changing.
func diffKeys[I, O any](t *testing.T, r infer.CustomDiff[I, O], in I, st O) []string {
	t.Helper()
	return diffKeysIn(t, context.Background(), r, in, st)
}

// diffKeysIn is diffKeys under ctx (the fake probes a step asks).
func diffKeysIn[I, O any](t *testing.T, ctx context.Context, r infer.CustomDiff[I, O], in I, st O) []string {
	t.Helper()
	d, err := r.Diff(ctx, infer.DiffRequest[I, O]{ID: "id", Inputs: in, State: st})
	if err != nil {
		t.Fatalf("diff: %v", err)
	}
	if d.HasChanges != (len(d.DetailedDiff) > 0) {
		t.Errorf("HasChanges %v with %v", d.HasChanges, d.DetailedDiff)
	}
	return slices.Sorted(maps.Keys(d.DetailedDiff))
}

// serveStat answers File's reads from the node's files, as
// nodefacts/filestats prints them for every path it asks about.
func serveStat(n *fakeNode) {
	n.onScriptFunc("nodefacts/filestats", func(cmd string) (ssh.Result, error) {
		paths := scriptPaths(cmd)
		var idx, modes, sums []string
		for i, p := range paths {
			if f, ok := n.files[p]; ok {
				idx = append(idx, strconv.Itoa(i))
				modes = append(modes, fmt.Sprintf("%o", f.mode.Perm()))
				sums = append(sums, sum(string(f.content))+"  "+p)
			}
		}
		out := strings.Join(idx, " ") + " \n" + strings.Join(append(modes, sums...), "\n")
		return ssh.Result{Stdout: []byte(out + "\n")}, nil
	})
}

// scriptPaths are the quoted paths of nodefacts/filestats' loop.
func scriptPaths(cmd string) []string {
	var list string
	for _, l := range strings.Split(cmd, "\n") {
		if rest, ok := strings.CutPrefix(l, "for p in "); ok {
			list, _, _ = strings.Cut(rest, "; do")
		}
	}
	var out []string
	for _, m := range regexp.MustCompile(`'((?:[^']|'\\'')*)'`).FindAllStringSubmatch(list, -1) {
		out = append(out, strings.ReplaceAll(m[1], `'\''`, "'"))
	}
	return out
}

const sysctlPath = "/etc/sysctl.d/90-homelab.conf"

func sysctlFile(conn Connection) FileArgs {
	return FileArgs{Connection: conn, Path: sysctlPath, Content: "net.ipv4.ip_forward = 1\n", Mode: 0o644, OnChange: "sysctl"}
}

// A file goes through its life on a node: written and applied once, read
// back as converged, repaired after an edit on the node, and left alone
// when only the way to the node changed.
func TestFileLifecycle(t *testing.T) {
	lab := newFakeLab(t)
	ctx := lab.ctx()
	cp1 := lab.node("cp-1")
	serveStat(cp1)
	cp1.onScript("onchange/sysctl", "", 0)
	in := sysctlFile(lab.conn("cp-1"))

	if _, err := (File{}).Create(ctx, infer.CreateRequest[FileArgs]{Inputs: in, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if cp1.dials != 0 {
		t.Fatalf("a preview's create reached the node: %v", cp1.events)
	}

	created, err := (File{}).Create(ctx, infer.CreateRequest[FileArgs]{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	apply, err := onChangeScript(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"upload " + sysctlPath, "run " + apply.String()}; !slices.Equal(cp1.mutations(), want) {
		t.Errorf("create did %v, want %v", cp1.mutations(), want)
	}
	if f := cp1.files[sysctlPath]; string(f.content) != in.Content || f.mode != 0o644 {
		t.Errorf("on the node: %q mode %o", f.content, f.mode)
	}
	if created.ID != "cp-1:"+sysctlPath {
		t.Errorf("id %q", created.ID)
	}

	st := refresh(t, ctx, File{}, in, created.Output)
	if st.Sha256 != sum(in.Content) || st.LiveMode != 0o644 {
		t.Errorf("read back sha %s mode %o", st.Sha256, st.LiveMode)
	}
	if d := diffKeys(t, File{}, in, st); len(d) > 0 {
		t.Errorf("a converged file shows changes: %v", d)
	}

	// Edited on the node, and its mode loosened.
	cp1.put(sysctlPath, "net.ipv4.ip_forward = 0\n", 0o666)
	st = refresh(t, ctx, File{}, in, st)
	if d := diffKeys(t, File{}, in, st); !slices.Equal(d, []string{"content", "mode"}) {
		t.Errorf("drift shows as %v", d)
	}
	cp1.reset()
	if _, err := (File{}).Update(ctx, infer.UpdateRequest[FileArgs, FileState]{Inputs: in, State: st}); err != nil {
		t.Fatal(err)
	}
	if f := cp1.files[sysctlPath]; string(f.content) != in.Content || f.mode != 0o644 || len(cp1.mutations()) != 2 {
		t.Errorf("repair left %q mode %o after %v", f.content, f.mode, cp1.mutations())
	}

	// A new SSH key: a change of the resource, not of the node.
	st = refresh(t, ctx, File{}, in, st)
	rekeyed := in
	rekeyed.Connection.PrivateKey = "key-2"
	if d := diffKeys(t, File{}, rekeyed, st); !slices.Equal(d, []string{"connection"}) {
		t.Errorf("a new key shows as %v", d)
	}
	cp1.reset()
	if _, err := (File{}).Update(ctx, infer.UpdateRequest[FileArgs, FileState]{Inputs: rekeyed, State: st}); err != nil {
		t.Fatal(err)
	}
	if cp1.dials != 0 {
		t.Errorf("a new key alone touched the node: %v", cp1.events)
	}

	// Another node, or another path: another file.
	other := in
	other.Path = "/etc/sysctl.d/91-homelab.conf"
	if d := diffKeys(t, File{}, other, st); !slices.Equal(d, []string{"path"}) {
		t.Errorf("another path shows as %v", d)
	}
}

func TestFileApplyFails(t *testing.T) {
	lab := newFakeLab(t)
	cp1 := lab.node("cp-1")
	cp1.onScriptFunc("onchange/sysctl", func(string) (ssh.Result, error) {
		return ssh.Result{Stderr: []byte("sysctl: cannot stat /proc/sys/net/ipv4/ip_forwrd: No such file or directory\n"), ExitCode: 255}, nil
	})
	_, err := (File{}).Create(lab.ctx(), infer.CreateRequest[FileArgs]{Inputs: sysctlFile(lab.conn("cp-1"))})
	if err == nil || !strings.Contains(err.Error(), "cp-1") || !strings.Contains(err.Error(), "ip_forwrd") {
		t.Errorf("a failed apply: %v", err)
	}
}

// What a File's refresh records for a node it cannot read (fileRead).
func TestFileReadUnreadable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialErr error
		keep    bool
	}{
		{"off or moved: last known state", unreachableErr("cp-1"), true},
		{"refuses the key: unknown, so written again", keyRefusedErr("cp-1"), false},
		{"host key changed: last known state (Host fails the refresh)", hostKeyChangedErr("cp-1"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := newFakeLab(t)
			in := sysctlFile(lab.conn("cp-1"))
			lab.node("cp-1").dialErr = tc.dialErr
			last := FileState{FileArgs: in, Sha256: sum(in.Content), LiveMode: in.Mode}
			st := refresh(t, lab.ctx(), File{}, in, last)
			if kept := st == last; kept != tc.keep {
				t.Errorf("state %+v, kept %v", st, kept)
			}
			if d := diffKeys(t, File{}, in, st); tc.keep == (len(d) > 0) {
				t.Errorf("changes %v", d)
			}
		})
	}
}

// A broken connection after the node answered fails the refresh: it is no
// answer to keep or forget anything by.
func TestFileReadCutOff(t *testing.T) {
	lab := newFakeLab(t)
	cp1 := lab.node("cp-1")
	cp1.onScriptFunc("nodefacts/filestats", func(string) (ssh.Result, error) {
		return ssh.Result{ExitCode: -1}, fmt.Errorf("ssh cp-1: \"stat\": connection reset")
	})
	in := sysctlFile(lab.conn("cp-1"))
	_, err := (File{}).Read(lab.ctx(), infer.ReadRequest[FileArgs, FileState]{ID: "id", Inputs: in, State: FileState{FileArgs: in}})
	if err == nil {
		t.Error("a read cut off passed")
	}
}

// Key material leaves a node whose control plane runs only with consent
// for that node; other files go, and an unreachable node's file is
// forgotten only with consent.
func TestFileDelete(t *testing.T) {
	const caKey = "/etc/kubernetes/pki/ca.key"
	for _, tc := range []struct {
		name      string
		path      string
		apiserver bool // its static pod manifest is there
		dialErr   error
		consent   string
		refused   bool
		removed   bool
	}{
		{"the CA key of a running control plane", caKey, true, nil, "", true, false},
		{"the CA key of a running control plane, consented", caKey, true, nil, "cp-1", false, true},
		{"consent for another node is none", caKey, true, nil, "cp-2", true, false},
		{"consent for every node", caKey, true, nil, "*", false, true},
		{"the encryption key of a running control plane", "/etc/kubernetes/encryption/config.yaml", true, nil, "", true, false},
		{"the CA key once the control plane is gone", caKey, false, nil, "", false, true},
		{"a certificate is no key", "/etc/kubernetes/pki/ca.crt", true, nil, "", false, true},
		{"a sysctl file", sysctlPath, true, nil, "", false, true},
		{"an unreachable node", sysctlPath, true, unreachableErr("cp-1"), "", true, false},
		{"an unreachable node, consented", sysctlPath, true, unreachableErr("cp-1"), "cp-1", false, false},
		// Written by a File before a Netplan took it over.
		{"the netplan file", netplan.Path, true, nil, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := newFakeLab(t)
			lab.config().allowDestroy = nodeList(tc.consent)
			cp1 := lab.node("cp-1")
			cp1.put(tc.path, "secret", 0o600)
			if tc.apiserver {
				cp1.onScript("file/control-plane-runs", "running\n", 0)
			} else {
				cp1.onScript("file/control-plane-runs", "", 0)
			}
			cp1.onScriptFunc("file/remove", func(cmd string) (ssh.Result, error) {
				if !strings.Contains(cmd, "p="+shell.Quote(tc.path)+"\n") {
					t.Errorf("removed another file than %s: %q", tc.path, cmd)
					return ssh.Result{ExitCode: 1}, nil
				}
				delete(cp1.files, tc.path)
				return ssh.Result{}, nil
			})
			cp1.dialErr = tc.dialErr
			st := FileState{FileArgs: FileArgs{Connection: lab.conn("cp-1"), Path: tc.path, Content: "secret", Mode: 0o600}}
			_, err := (File{}).Delete(lab.ctx(), infer.DeleteRequest[FileState]{ID: "id", State: st})
			if refused := err != nil && strings.Contains(err.Error(), RefusedMarker); refused != tc.refused || (err != nil && !refused) {
				t.Errorf("delete: %v", err)
			}
			if tc.refused && (!strings.Contains(err.Error(), "--allow-destroy cp-1") || len(cp1.mutations()) > 0) {
				t.Errorf("the refusal %q, after %v", err, cp1.mutations())
			}
			if _, there := cp1.files[tc.path]; there == tc.removed {
				t.Errorf("removed %v, after %v", !there, cp1.events)
			}
		})
	}
}

// A refresh reads a node's files at once: one command reads them all, and
// each File gets its own file's stat; another node's are another command.
func TestFileReadsOfANodeShareOneCommand(t *testing.T) {
	lab := newFakeLab(t)
	// cp-1's batch runs once its four reads are in, however slow the
	// machine; cp-2's single read once the window closed.
	batches := newReadBatches()
	batches.files.window, batches.files.max = 500*time.Millisecond, 4
	lab.config().batches = batches
	ctx := lab.ctx()
	cp1, cp2 := lab.node("cp-1"), lab.node("cp-2")
	serveStat(cp1)
	serveStat(cp2)
	paths := []string{"/etc/a.conf", "/etc/b.conf", "/etc/missing.conf", "/etc/it's.conf"}
	for i, p := range paths[:2] {
		cp1.put(p, fmt.Sprintf("content %d\n", i), 0o640)
	}
	cp1.put(paths[3], "quoted\n", 0o600)
	cp2.put(paths[0], "cp-2's\n", 0o644)

	type read struct {
		node, path string
		st         FileState
		err        error
	}
	var reads []*read
	for _, p := range paths {
		reads = append(reads, &read{node: "cp-1", path: p})
	}
	reads = append(reads, &read{node: "cp-2", path: paths[0]})
	var wg sync.WaitGroup
	for _, r := range reads {
		wg.Go(func() {
			in := FileArgs{Connection: lab.conn(r.node), Path: r.path, Content: "x", Mode: 0o644}
			resp, err := (File{}).Read(ctx, infer.ReadRequest[FileArgs, FileState]{ID: "id", Inputs: in, State: FileState{FileArgs: in}})
			r.st, r.err = resp.State, err
		})
	}
	wg.Wait()

	for _, r := range reads {
		if r.err != nil {
			t.Fatalf("%s %s: %v", r.node, r.path, r.err)
		}
		f, ok := lab.node(r.node).files[r.path]
		want := FileState{}
		if ok {
			want.LiveMode, want.Sha256 = int(f.mode.Perm()), sum(string(f.content))
		}
		if r.st.LiveMode != want.LiveMode || r.st.Sha256 != want.Sha256 {
			t.Errorf("%s %s: mode %o sha %q, want %o %q", r.node, r.path, r.st.LiveMode, r.st.Sha256, want.LiveMode, want.Sha256)
		}
	}
	for node, want := range map[*fakeNode]int{cp1: 1, cp2: 1} {
		if got := len(node.events); got != want {
			t.Errorf("%s: %d commands, want %d: %v", node.name, got, want, node.events)
		}
	}
}

// An onChange that names no script is refused before the file is written:
// a file the node would not apply is not left there.
func TestFileRefusesAnUnknownOnChange(t *testing.T) {
	lab := newFakeLab(t)
	cp1 := lab.node("cp-1")
	in := sysctlFile(lab.conn("cp-1"))
	in.OnChange = "sysctl -e -p " + sysctlPath
	_, err := (File{}).Create(lab.ctx(), infer.CreateRequest[FileArgs]{Inputs: in})
	if err == nil || !strings.Contains(err.Error(), "onChange") {
		t.Errorf("created with onChange %q: %v", in.OnChange, err)
	}
	if len(cp1.mutations()) > 0 {
		t.Errorf("changed the node: %v", cp1.mutations())
	}
}

func TestOnChangeScriptsGolden(t *testing.T) {
	for _, name := range []string{"sysctl", "daemon-reload"} {
		s, err := onChangeScript(FileArgs{Path: "/etc/example", OnChange: name})
		if err != nil {
			t.Fatal(err)
		}
		scriptstest.Golden(t, s, "")
	}
}

// A file its unit reads only when it starts: an edit on the node put back
// restarts the unit (and waits for containerd to serve), or containerd
// would go on running on the edit (measured in the lab: pods in cgroupfs
// cgroups with the file repaired); a declared change leaves the restart
// to the unit's Service, whose trigger changed.
func TestFileRepairRestartsItsUnit(t *testing.T) {
	lab := newFakeLab(t)
	ctx := lab.ctx()
	n := lab.node("gpu-1")
	serveStat(n)
	unit := serveUnit(n, containerd.Unit)
	unit.enabled, unit.active = true, true
	in := FileArgs{Connection: lab.conn("gpu-1"), Path: containerd.ConfigPath, Content: "SystemdCgroup = true\n", Mode: 0o644, Restarts: containerd.Unit}
	created, err := (File{}).Create(ctx, infer.CreateRequest[FileArgs]{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	if unit.restarts != 0 {
		t.Errorf("a created file restarted its unit (its Service does)")
	}
	n.put(containerd.ConfigPath, "SystemdCgroup = false\n", 0o644)
	st := refresh(t, ctx, File{}, in, created.Output)
	n.reset()
	if _, err := (File{}).Update(ctx, infer.UpdateRequest[FileArgs, FileState]{Inputs: in, State: st}); err != nil {
		t.Fatal(err)
	}
	if unit.restarts != 1 || n.ran("containerd/ready") != 1 {
		t.Errorf("drift put back: %d restarts, then %v", unit.restarts, scriptSteps(n))
	}

	// A unit that does not run (on a replaced machine, not even
	// installed yet) is not restarted: it reads the file when it starts.
	unit.active = false
	n.put(containerd.ConfigPath, "SystemdCgroup = false\n", 0o644)
	st = refresh(t, ctx, File{}, in, st)
	if _, err := (File{}).Update(ctx, infer.UpdateRequest[FileArgs, FileState]{Inputs: in, State: st}); err != nil {
		t.Fatalf("drift put back under a unit that does not run: %v", err)
	}
	if unit.restarts != 1 || unit.active {
		t.Errorf("drift put back under a stopped unit: %d restarts, active %v", unit.restarts, unit.active)
	}
	unit.active = true

	changed := in
	changed.Content = "SystemdCgroup = true\nsandbox_image = \"registry.k8s.io/pause:3.10.1\"\n"
	st = refresh(t, ctx, File{}, in, st)
	if _, err := (File{}).Update(ctx, infer.UpdateRequest[FileArgs, FileState]{Inputs: changed, State: st}); err != nil {
		t.Fatal(err)
	}
	if unit.restarts != 1 {
		t.Errorf("a declared change restarted the unit from the File: %d restarts", unit.restarts)
	}
}
