package envvars

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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
