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

// No product code builds a command in Go: every command an Executor runs
// is a rendered script (its String), the SSH transport's own included.
// The emulated homelab (infra/lab) drives its own nodes and is not the
// product.
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
			case "infra/lab", ".git", "infra/scripts":
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
		t.Errorf("%s: %d commands built in Go: make each a script file under infra/scripts, rendered with scripts.Render", f, found[f])
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
