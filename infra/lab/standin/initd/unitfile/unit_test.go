package unitfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// write creates node files under root.
func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func link(t *testing.T, root, target, at string) {
	t.Helper()
	full := filepath.Join(root, at)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		t.Fatal(err)
	}
}

func argv(t *testing.T, p Paths, u *Unit, c Command) []string {
	t.Helper()
	envf, err := ReadEnvFiles(p, u.EnvironmentFiles)
	if err != nil {
		t.Fatal(err)
	}
	return ExpandArgs(c.Words, EnvMap(MergeEnv(u.Environment, envf)))
}

func TestDropInResetsExecStartAndExpandsEnv(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"/usr/lib/systemd/system/app.service": "[Unit]\nDescription=App\n[Service]\nExecStart=/bin/app --old\nRestart=always\nRestartSec=10\n[Install]\nWantedBy=multi-user.target\n",
		"/usr/lib/systemd/system/app.service.d/10-x.conf": `[Service]
Environment="A=--a1 --a2" B=--b
EnvironmentFile=-/etc/default/missing
EnvironmentFile=/var/lib/app/flags.env
ExecStart=
ExecStart=/bin/app $A ${B}x "${A}" $UNSET $$HOME --c=%n \
  --continued
`,
		"/var/lib/app/flags.env": "# comment\nC=\"one two\"\n",
	})
	p := Paths{Root: root}
	u, err := Load(p, "app")
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "app.service" || u.Description != "App" || u.Restart != "always" || u.RestartSec != 10*time.Second {
		t.Fatalf("unexpected unit %+v", u)
	}
	if len(u.ExecStart) != 1 {
		t.Fatalf("ExecStart= should reset the list, got %d commands", len(u.ExecStart))
	}
	if want := []string{"/usr/lib/systemd/system/app.service.d/10-x.conf"}; !reflect.DeepEqual(u.DropIns, want) {
		t.Fatalf("drop-ins %v, want %v", u.DropIns, want)
	}
	got := argv(t, p, u, u.ExecStart[0])
	want := []string{"/bin/app", "--a1", "--a2", "--bx", "--a1 --a2", "$HOME", "--c=app.service", "--continued"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("argv\n got %q\nwant %q", got, want)
	}
}

func TestRequiredEnvironmentFileMissing(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"/etc/systemd/system/x.service": "[Service]\nEnvironmentFile=/nope\nExecStart=/bin/true\n",
	})
	p := Paths{Root: root}
	u, err := Load(p, "x.service")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadEnvFiles(p, u.EnvironmentFiles); err == nil {
		t.Fatal("a missing EnvironmentFile without '-' must be an error")
	}
}

func TestPrecedenceAliasAndMask(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"/lib/systemd/system/ssh.service":                  "[Service]\nExecStart=/usr/sbin/sshd -D\n[Install]\nWantedBy=multi-user.target\nAlias=sshd.service\n",
		"/lib/systemd/system/ssh.service.d/10-a.conf":      "[Service]\nEnvironment=FROM=lib\n",
		"/etc/systemd/system/ssh.service.d/10-a.conf":      "[Service]\nEnvironment=FROM=etc\n",
		"/usr/lib/systemd/system/ssh.service.d/20-b.conf":  "[Service]\nEnvironment=B=usr\n",
		"/usr/lib/systemd/system/other.service":            "[Service]\nExecStart=/bin/vendor\n",
		"/etc/systemd/system/other.service":                "[Service]\nExecStart=/bin/admin\n",
		"/usr/lib/systemd/system/gone.service":             "[Service]\nExecStart=/bin/true\n",
		"/usr/lib/systemd/system/static.service":           "[Service]\nExecStart=/bin/true\n",
		"/usr/lib/systemd/system/kubelet.service":          "[Service]\nExecStart=/bin/k\n[Install]\nWantedBy=multi-user.target\n",
		"/usr/lib/systemd/system/kubelet.service.d/x.conf": "[Service]\nRestart=on-failure\n",
	})
	link(t, root, "/dev/null", "/etc/systemd/system/gone.service")
	p := Paths{Root: root}

	u, err := Load(p, "ssh")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/etc/systemd/system/ssh.service.d/10-a.conf", "/usr/lib/systemd/system/ssh.service.d/20-b.conf"}; !reflect.DeepEqual(u.DropIns, want) {
		t.Fatalf("drop-ins %v, want %v", u.DropIns, want)
	}
	if want := []string{"FROM=etc", "B=usr"}; !reflect.DeepEqual(u.Environment, want) {
		t.Fatalf("env %v, want %v", u.Environment, want)
	}

	// Alias= alone (no symlink yet) resolves too.
	a, err := Load(p, "sshd")
	if err != nil || a.Name != "ssh.service" {
		t.Fatalf("alias: %v %+v", err, a)
	}

	o, err := Load(p, "other")
	if err != nil || o.FragmentPath != "/etc/systemd/system/other.service" || o.ExecStart[0].Words[0] != "/bin/admin" {
		t.Fatalf("/etc must override /usr/lib: %v %+v", err, o)
	}

	g, err := Load(p, "gone")
	if err != nil || !g.Masked {
		t.Fatalf("masked: %v %+v", err, g)
	}
	if _, err := Load(p, "firewalld"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}

	// enable/disable/is-enabled work on files alone.
	check := func(name, want string) {
		t.Helper()
		got, err := IsEnabled(p, name)
		if err != nil || got != want {
			t.Fatalf("is-enabled %s = %q, %v; want %q", name, got, err, want)
		}
	}
	check("kubelet", "disabled")
	check("static", "static")
	check("gone", "masked")
	ch, err := Enable(p, "kubelet")
	if err != nil || len(ch) != 1 || ch[0].Path != "/etc/systemd/system/multi-user.target.wants/kubelet.service" || ch[0].Target != "/usr/lib/systemd/system/kubelet.service" {
		t.Fatalf("enable: %v %+v", err, ch)
	}
	check("kubelet", "enabled")
	if _, err := Enable(p, "ssh"); err != nil {
		t.Fatal(err)
	}
	check("sshd", "alias")
	if got := BootUnits(p); !reflect.DeepEqual(got, []string{"kubelet.service", "ssh.service"}) {
		t.Fatalf("boot units %v", got)
	}
	ch, err = Disable(p, "ssh")
	if err != nil || len(ch) != 2 {
		t.Fatalf("disable ssh: %v %+v", err, ch)
	}
	check("ssh", "disabled")
	if _, err := Enable(p, "gone"); err == nil {
		t.Fatal("enabling a masked unit must fail")
	}
	if _, err := Enable(p, "nope"); err == nil {
		t.Fatal("enabling a missing unit must fail")
	}
}

func TestSplitWords(t *testing.T) {
	for in, want := range map[string][]string{
		`a "b c" 'd e'f`:      {"a", "b c", "d ef"},
		`x\ty "q\"uote"`:      {"x\ty", `q"uote`},
		`  lead   trail  `:    {"lead", "trail"},
		`"KEY=a b" K2=c`:      {"KEY=a b", "K2=c"},
		`-/bin/x --flag=\x41`: {"-/bin/x", "--flag=A"},
	} {
		got, err := SplitWords(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SplitWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := SplitWords(`"open`); err == nil {
		t.Error("unterminated quote must fail")
	}
}

func TestParseEnvFile(t *testing.T) {
	in := `# kubeadm writes this
KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"
; other comment
export EXPORTED=yes
  SPACED =  value with trailing   
SINGLE='$NOT \expanded'
ESC="a \"q\" \$x"
CONT=one\
two
EMPTY=
not an assignment
1BAD=x
`
	got := EnvMap(ParseEnvFile(in))
	want := map[string]string{
		"KUBELET_KUBEADM_ARGS": "--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10",
		"EXPORTED":             "yes",
		"SPACED":               "value with trailing",
		"SINGLE":               `$NOT \expanded`,
		"ESC":                  `a "q" $x`,
		"CONT":                 "onetwo",
		"EMPTY":                "",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestParseCommandPrefixes(t *testing.T) {
	c, err := ParseCommand(`-@/bin/sh mysh -c "exit 1"`)
	if err != nil || !c.IgnoreFailure || !c.ArgvZero || !reflect.DeepEqual(c.Words, []string{"/bin/sh", "mysh", "-c", "exit 1"}) {
		t.Fatalf("%+v %v", c, err)
	}
	c, err = ParseCommand(`+/usr/bin/x`)
	if err != nil || c.IgnoreFailure || c.Words[0] != "/usr/bin/x" {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"5": 5 * time.Second, "100ms": 100 * time.Millisecond, "1min 30s": 90 * time.Second,
		"2h": 2 * time.Hour, "1.5s": 1500 * time.Millisecond, "10sec": 10 * time.Second,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseDuration("5 parsecs"); err == nil {
		t.Error("bad unit must fail")
	}
}

func TestConditions(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"/etc/keepalived/empty.conf": "",
		"/etc/keepalived/full.conf":  "x",
	})
	p := Paths{Root: root}
	for _, tc := range []struct {
		conds []Condition
		ok    bool
	}{
		{[]Condition{{"PathExists", "!/etc/ssh/sshd_not_to_be_run"}}, true},
		{[]Condition{{"PathExists", "/etc/ssh/sshd_not_to_be_run"}}, false},
		{[]Condition{{"FileNotEmpty", "/etc/keepalived/empty.conf"}}, false},
		{[]Condition{{"FileNotEmpty", "/etc/keepalived/full.conf"}}, true},
		{[]Condition{{"PathExists", "|/nope"}, {"PathExists", "|/etc/keepalived"}}, true},
		{[]Condition{{"PathExists", "|/nope"}, {"PathExists", "|/nope2"}}, false},
		{[]Condition{{"Virtualization", "container"}}, true},
	} {
		u := &Unit{Conditions: tc.conds}
		if got := u.FailedCondition(p) == nil; got != tc.ok {
			t.Errorf("%v: ok=%v, want %v", tc.conds, got, tc.ok)
		}
	}
}
