package queue_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's programs check every error they are given: err, once
// assigned, is read before it is assigned again or its block ends, so a
// copied snippet never drops a failed Publish, Pull or Ack.
func TestReadmeSnippetsCheckErrors(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	for i, b := range goBlock.FindAllSubmatch(readme, -1) {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "main.go", b[1], 0)
		require.NoError(t, err, "snippet %d", i)
		ast.Inspect(f, func(n ast.Node) bool {
			if block, ok := n.(*ast.BlockStmt); ok {
				for j, s := range block.List {
					if assignsErr(s) && !readBeforeAssigned(block.List[j+1:]) {
						t.Errorf("snippet %d, line %d: err is assigned and not checked", i, fset.Position(s.Pos()).Line)
					}
				}
			}
			return true
		})
	}
}

// assignsErr reports whether s assigns a variable named err.
func assignsErr(s ast.Stmt) bool {
	a, ok := s.(*ast.AssignStmt)
	if !ok {
		return false
	}
	for _, l := range a.Lhs {
		if id, ok := l.(*ast.Ident); ok && id.Name == "err" {
			return true
		}
	}
	return false
}

// readBeforeAssigned reports whether one of stmts reads err before one
// assigns it.
func readBeforeAssigned(stmts []ast.Stmt) bool {
	for _, s := range stmts {
		if readsErr(s) {
			return true
		}
		if assignsErr(s) {
			return false
		}
	}
	return false
}

// readsErr reports whether s reads a variable named err (on the left of
// an assignment it is written, not read).
func readsErr(s ast.Stmt) bool {
	found := false
	ast.Inspect(s, func(n ast.Node) bool {
		if a, ok := n.(*ast.AssignStmt); ok {
			for _, r := range a.Rhs {
				found = found || readsErr(&ast.ExprStmt{X: r})
			}
			return false
		}
		if id, ok := n.(*ast.Ident); ok && id.Name == "err" {
			found = true
		}
		return !found
	})
	return found
}
