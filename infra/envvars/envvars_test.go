package envvars

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var name = regexp.MustCompile(`^HOMELAB_[A-Z0-9_]+$`)

// declared reads this package's constants.
func declared(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "envvars.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, _ := strconv.Unquote(lit.Value); name.MatchString(v) {
				out[v] = true
			}
		}
		return true
	})
	return out
}

// Every HOMELAB_ variable is named here and nowhere else in Go, so this
// file stays the whole list.
func TestOneHomeForEveryVariable(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || filepath.Base(filepath.Dir(p)) == "envvars" {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, _ := strconv.Unquote(lit.Value); name.MatchString(v) {
					t.Errorf("%s spells %s: name it through infra/envvars", p, v)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The list users read (docs/design.md) names every variable.
func TestDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	for v := range declared(t) {
		if !strings.Contains(string(doc), "`"+v+"`") {
			t.Errorf("docs/design.md does not list `%s`", v)
		}
	}
}

// edges are the product's files that may read the environment: where a
// process starts (its commands, the provider's Configure, the stack that
// hands the engine its environment, SSH's OptionsFromEnv for those two)
// and where the tools are found. Everything below them is handed what
// they read, so a step, a check or a dial never depends on a variable
// set or missing in the process that happens to run it.
var edges = map[string]bool{
	"infra/provider/config.go": true,
	"infra/stack/stack.go":     true,
	"infra/ssh/ssh.go":         true,
	"infra/tools/tools.go":     true,
}

// The product outside its edges reads no environment variable (issue
// 34): os.Getenv, os.LookupEnv and os.Environ appear only in cmd/ and the
// files in edges. The emulated homelab (infra/lab) is no product, and a
// tool's own test helpers (toolstest) are test support.
func TestEnvironmentReadOnlyAtTheEdges(t *testing.T) {
	root := filepath.Join("..", "..")
	reads := map[string]bool{"Getenv": true, "LookupEnv": true, "Environ": true}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case ".git", "cmd", "infra/lab", "infra/tools/toolstest":
				return filepath.SkipDir
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || edges[rel] {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "os" && reads[sel.Sel.Name] {
				t.Errorf("%s reads the environment (os.%s): read it at an edge (%v, cmd/) and pass it down", rel, sel.Sel.Name, keys(edges))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
