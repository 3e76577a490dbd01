package scripts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stillInline is where shell is still built in Go, waiting to move into a
// file here (issue 34): each file with how many commands. The count may
// only go down, and a file leaves the list when it reaches zero.
var stillInline = map[string]int{
	"infra/provider/host.go":    1,
	"infra/provider/package.go": 4,
	"infra/provider/upgrade.go": 16,
}

// No product code builds a command in Go: every command an Executor runs
// is a rendered script (its String), and scripts.Legacy, the wrapper of a
// command built the old way, is used nowhere but in stillInline's files.
// The emulated homelab (infra/lab) drives its own nodes and is not the
// product; infra/ssh is the Executor itself.
func TestNoShellBuiltInGo(t *testing.T) {
	root := filepath.Join("..", "..")
	found := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case "infra/lab", "infra/ssh", ".git", "infra/scripts":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "scripts" && sel.Sel.Name == "Legacy" {
				found[rel]++
				return true
			}
			switch sel.Sel.Name {
			case "Run", "Query", "RunInput":
			default:
				return true
			}
			// An Executor's methods take ctx and the command.
			if len(call.Args) < 2 || !isCtx(call.Args[0]) {
				return true
			}
			switch call.Args[1].(type) {
			case *ast.CompositeLit, *ast.UnaryExpr:
				// doctor.Run(ctx, doctor.Target{...}): not a command.
				return true
			}
			if !isRendering(call.Args[1]) {
				found[rel]++
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range slices.Sorted(maps.Keys(found)) {
		switch allowed, ok := stillInline[f]; {
		case !ok:
			t.Errorf("%s: %d commands built in Go: make each a script file under infra/scripts, rendered with scripts.Render", f, found[f])
		case found[f] > allowed:
			t.Errorf("%s: %d commands built in Go, %d before: new ones go into script files", f, found[f], allowed)
		case found[f] < allowed:
			t.Errorf("%s: %d commands built in Go, down from %d: lower stillInline to match", f, found[f], allowed)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(stillInline)) {
		if found[f] == 0 {
			t.Errorf("%s builds no command in Go any more: take it out of stillInline", f)
		}
	}
}

func isCtx(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && (id.Name == "ctx" || strings.HasSuffix(id.Name, "ctx") || strings.HasSuffix(id.Name, "Ctx"))
}

// isRendering is a script's text: X.String(), or scripts.Render(...).String().
func isRendering(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 0 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "String"
}
