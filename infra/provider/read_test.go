package provider

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/ssh"
)

// captureLog collects what the steps log (the engine's log when the
// provider runs under it).
func captureLog(t *testing.T) *bytes.Buffer {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &buf
}

type toyState struct{ live string }

// Every way a node can fail to be read, under each named policy: the
// state that stands, or the error.
func TestReadPolicies(t *testing.T) {
	unknown := func(toyState) toyState { return toyState{live: "unknown"} }
	policies := map[string]readPolicy[toyState]{
		"keepOrRecheck": keepOrRecheck(unknown),
		"keepLastState": keepLastState[toyState](),
		"host":          {Unreachable: keepLast, KeyRefused: keepLast, HostKeyChanged: failRead, NotAnswered: keepLast},
	}
	cutOff := errors.New("connection reset")
	for _, tc := range []struct {
		name    string
		dialErr error
		readErr error
		want    map[string]string // policy: live recorded, or "error"
	}{
		{"read", nil, nil, map[string]string{"keepOrRecheck": "read", "keepLastState": "read", "host": "read"}},
		{"unreachable", unreachableErr("n"), nil, map[string]string{"keepOrRecheck": "last", "keepLastState": "last", "host": "last"}},
		{"key refused", keyRefusedErr("n"), nil, map[string]string{"keepOrRecheck": "unknown", "keepLastState": "last", "host": "last"}},
		{"host key changed", hostKeyChangedErr("n"), nil, map[string]string{"keepOrRecheck": "last", "keepLastState": "last", "host": "error"}},
		{"API down", nil, unanswered(errors.New("kubectl exit 1")), map[string]string{"keepOrRecheck": "last", "keepLastState": "last", "host": "last"}},
		{"cut off while reading", nil, cutOff, map[string]string{"keepOrRecheck": "error", "keepLastState": "error", "host": "error"}},
	} {
		for name, pol := range policies {
			lab := newFakeLab(t)
			lab.node("n").dialErr = tc.dialErr
			st, err := readNode(lab.ctx(), lab.conn("n"), toyState{live: "last"}, pol, func(ssh.Executor) (toyState, error) {
				return toyState{live: "read"}, tc.readErr
			})
			got := st.live
			if err != nil {
				got = "error"
			}
			if got != tc.want[name] {
				t.Errorf("%s under %s: %s (%v), want %s", tc.name, name, got, err, tc.want[name])
			}
		}
	}
}

// The rebuilt-homelab end-to-end test looks for this warning; the node is
// named in it.
func TestReadLogsWhy(t *testing.T) {
	log := captureLog(t)
	lab := newFakeLab(t)
	lab.node("gpu-2").dialErr = keyRefusedErr("gpu-2")
	readNode(lab.ctx(), lab.conn("gpu-2"), toyState{}, keepOrRecheck(func(toyState) toyState { return toyState{} }), func(ssh.Executor) (toyState, error) {
		return toyState{}, nil
	})
	if s := log.String(); !strings.Contains(s, "gpu-2 refused the SSH key this state was made with") || !strings.Contains(s, "re-checked") {
		t.Errorf("logged %q", s)
	}
}

// State the cluster holds is read through the first node that answers; a
// read error nobody marked fails it at once.
func TestReadAny(t *testing.T) {
	read := func(ex ssh.Executor) (toyState, error) {
		if _, err := ex.Read(t.Context(), "/etc/kubernetes/pki/etcd/ca.crt"); err != nil {
			return toyState{}, unanswered(err)
		}
		return toyState{live: "read on " + ex.HostKey()}, nil
	}
	unknown := func(toyState) toyState { return toyState{live: "unknown"} }
	for _, tc := range []struct {
		name  string
		setup func(l *fakeLab)
		pol   readPolicy[toyState]
		want  string
	}{
		{"first answers", func(l *fakeLab) {
			l.node("cp-1").put("/etc/kubernetes/pki/etcd/ca.crt", "ca", 0o644)
			l.node("cp-2").put("/etc/kubernetes/pki/etcd/ca.crt", "ca", 0o644)
		}, keepLastState[toyState](), "read on SHA256:cp-1"},
		{"first off, second answers", func(l *fakeLab) {
			l.node("cp-1").dialErr = unreachableErr("cp-1")
			l.node("cp-2").put("/etc/kubernetes/pki/etcd/ca.crt", "ca", 0o644)
		}, keepLastState[toyState](), "read on SHA256:cp-2"},
		{"none answers", func(l *fakeLab) {
			l.node("cp-1").dialErr = unreachableErr("cp-1")
		}, keepLastState[toyState](), "last"},
		{"one refuses the key, none answers", func(l *fakeLab) {
			l.node("cp-1").dialErr = unreachableErr("cp-1")
			l.node("cp-2").dialErr = keyRefusedErr("cp-2")
		}, keepOrRecheck(unknown), "unknown"},
		{"one has a changed host key", func(l *fakeLab) {
			l.node("cp-1").dialErr = hostKeyChangedErr("cp-1")
			l.node("cp-2").put("/etc/kubernetes/pki/etcd/ca.crt", "ca", 0o644)
		}, readPolicy[toyState]{HostKeyChanged: failRead}, "error"},
	} {
		lab := newFakeLab(t)
		conns := []Connection{lab.conn("cp-1"), lab.conn("cp-2")}
		tc.setup(lab)
		st, err := readAny(lab.ctx(), "etcd", conns, toyState{live: "last"}, tc.pol, read)
		got := st.live
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("%s: %s (%v), want %s", tc.name, got, err, tc.want)
		}
	}
	lab := newFakeLab(t)
	_, err := readAny(lab.ctx(), "etcd", []Connection{lab.conn("cp-1"), lab.conn("cp-2")}, toyState{}, keepLastState[toyState](), func(ssh.Executor) (toyState, error) {
		return toyState{}, errors.New("a reply that makes no sense")
	})
	if err == nil || lab.node("cp-2").dials != 0 {
		t.Errorf("an unmarked read error: %v, after %d dials of cp-2", err, lab.node("cp-2").dials)
	}
}

// An API whose certificates expired fails kubectl on the node with its
// TLS error. Every read that goes through it keeps its last state, warns
// naming the reason (never a silent success), and the plan stays as it
// was: nothing reads as gone, so nothing is re-created or deleted.
func TestReadsThroughAnExpiredAPIKeepTheLastState(t *testing.T) {
	const why = "Unable to connect to the server: tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2027-06-01T12:00:00Z is after 2027-05-31T12:00:00Z"
	lab := newFakeLab(t)
	cp := lab.node("cp-1")
	cp.onScriptWithFunc(anyScript, kubectl, func(string) (ssh.Result, error) { return ssh.Result{Stderr: []byte(why + "\n"), ExitCode: 1}, nil })
	cp.put(adminConf, "apiVersion: v1\nkind: Config\n", 0o600)
	log := captureLog(t)

	meta := NodeMetaArgs{Via: lab.conn("cp-1"), Node: "gpu-1", Labels: map[string]string{"tier": "fast"}}
	lastMeta := NodeMetaState{NodeMetaArgs: meta, LiveLabels: map[string]string{"tier": "fast"}}
	if got := refresh(t, lab.ctx(), NodeMeta{}, meta, lastMeta); !maps.Equal(got.LiveLabels, lastMeta.LiveLabels) || len(nodeMetaChanges(meta, got)) > 0 {
		t.Errorf("NodeMeta: %+v", got.LiveLabels)
	}
	man := ManifestArgs{Via: lab.conn("cp-1"), Kind: "runtimeclass", Name: "nvidia", Content: "x"}
	if got := refresh(t, lab.ctx(), Manifest{}, man, ManifestState{ManifestArgs: man, Exists: true}); !got.Exists || len(manifestChanges(man, got)) > 0 {
		t.Errorf("Manifest: exists %v", got.Exists)
	}
	dp := DataplaneArgs{Via: lab.conn("cp-1"), Replacement: "none", CNI: "cilium", Values: "{}"}
	lastDP := DataplaneState{DataplaneArgs: dp, KubeProxy: true, ReleasePresent: true, ReleaseValues: canonical("{}")}
	if got := refresh(t, lab.ctx(), Dataplane{}, dp, lastDP); !got.KubeProxy || !got.ReleasePresent || len(dataplaneChanges(dp, got)) > 0 {
		t.Errorf("Dataplane: %+v", got)
	}
	logged := log.String()
	if n := strings.Count(logged, "x509: certificate has expired"); n != 3 {
		t.Errorf("%d warnings name the expired certificate, want one per read:\n%s", n, logged)
	}
	if m := cp.mutations(); len(m) > 0 {
		t.Errorf("reads ran %v", m)
	}
}
