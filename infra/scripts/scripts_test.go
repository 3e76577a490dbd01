package scripts

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/envvars"
)

const goldenDir = "testdata/golden"

// goldens maps each golden file (relative to goldenDir) to the script it
// renders.
func goldens(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(goldenDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(goldenDir, p)
		name, _, _ := strings.Cut(strings.TrimSuffix(filepath.ToSlash(rel), ".sh"), "@")
		out[rel] = name
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every script has a golden rendering, written by the test of the step
// that gives it its values, and every golden renders a script that exists.
func TestEveryScriptHasAGolden(t *testing.T) {
	g := goldens(t)
	rendered := map[string]bool{}
	for file, name := range g {
		if _, ok := templates[name]; !ok {
			t.Errorf("%s: golden of no script (%s.sh is gone): delete it", file, name)
		}
		rendered[name] = true
	}
	for _, name := range Names() {
		if !rendered[name] {
			t.Errorf("%s.sh has no golden rendering: render it with scriptstest.Golden in the test of the step that runs it", name)
		}
	}
}

// Every golden rendering parses in dash and bash and passes shellcheck as
// POSIX sh: what a node's shell will read.
func TestGoldensPassShellcheck(t *testing.T) {
	g := goldens(t)
	if len(g) == 0 {
		t.Fatal("no golden renderings")
	}
	check := []string{"shellcheck"}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		if os.Getenv(envvars.RequireTools) != "" {
			t.Fatalf("shellcheck is missing (Debian's shellcheck package; infra/tools/setup.sh installs it)")
		}
		t.Logf("shellcheck is missing: only sh -n and bash -n run")
		check = nil
	}
	var files []string
	for f := range g {
		files = append(files, f)
	}
	slices.Sort(files)
	for _, f := range files {
		p := filepath.Join(goldenDir, f)
		for _, sh := range []string{"sh", "bash"} {
			if out, err := exec.Command(sh, "-n", p).CombinedOutput(); err != nil {
				t.Errorf("%s -n %s: %v\n%s", sh, f, err, out)
			}
		}
		if check != nil {
			if out, err := exec.Command("shellcheck", "--shell=sh", "--norc", p).CombinedOutput(); err != nil {
				t.Errorf("shellcheck %s: %v\n%s", f, err, out)
			}
		}
	}
}

// The header does what it says in the shells nodes run: the real shells
// are the oracle.
func TestHeaderStopsOnFailure(t *testing.T) {
	cases := []struct {
		body string
		// reached: whether the line after body runs, per shell.
		dash, bash bool
	}{
		{body: "false", dash: false, bash: false},
		{body: `echo "$unset_variable"`, dash: false, bash: false},
		// dash (0.5.12 in Debian 12) has no pipefail: the header says so.
		{body: "false | true", dash: true, bash: false},
		{body: "false || true", dash: true, bash: true},
	}
	for _, c := range cases {
		for sh, want := range map[string]bool{"sh": c.dash, "bash": c.bash} {
			out, _ := exec.Command(sh, "-c", header+c.body+"\necho reached").Output()
			if got := strings.Contains(string(out), "reached"); got != want {
				t.Errorf("%s: after %q, reached=%v, want %v", sh, c.body, got, want)
			}
		}
	}
}

// NameOf reads every golden rendering's name back from its header.
func TestNameOfReadsTheHeader(t *testing.T) {
	for file, name := range goldens(t) {
		b, err := os.ReadFile(filepath.Join(goldenDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := NameOf(string(b)); !ok || got != name {
			t.Errorf("NameOf(%s) = %q, %v, want %q", file, got, ok, name)
		}
	}
	for _, cmd := range []string{"", "ls", "# homelab: \nls", "# homelab: ../x\n", "# other: x\n"} {
		if name, ok := NameOf(cmd); ok {
			t.Errorf("NameOf(%q) = %q, want none", cmd, name)
		}
	}
}

func TestRenderRefusesAnUnknownScript(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "no-such") {
			t.Errorf("Render of an unknown script: recovered %v", r)
		}
	}()
	Render("no-such/script", nil)
}
