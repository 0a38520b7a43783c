package queue_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/queue"
)

// The package's examples check the error of every call on a queue or a
// message, and of every call into package queue: none is assigned to _
// nor dropped with the call's results, so a copied example never drops a
// failed Extend, Nack or Ack. (Setup calls of other packages, such as
// os.MkdirTemp, are left alone.)
func TestExamplesCheckErrors(t *testing.T) {
	files, err := filepath.Glob("*example*_test.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, name := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Example") {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if a, ok := n.(*ast.AssignStmt); ok && discardsMethodResult(a) {
					t.Errorf("%s: %s assigns the error of a call to _", fset.Position(a.Pos()), fn.Name.Name)
				}
				if e, ok := n.(*ast.ExprStmt); ok && dropsQueueError(e) {
					t.Errorf("%s: %s drops the error of a call", fset.Position(e.Pos()), fn.Name.Name)
				}
				return true
			})
		}
	}
}

// discardsMethodResult reports whether a assigns the last result of a
// method call on a variable (m.Ack()), or of a call into package queue,
// to _.
func discardsMethodResult(a *ast.AssignStmt) bool {
	last, ok := a.Lhs[len(a.Lhs)-1].(*ast.Ident)
	if !ok || last.Name != "_" || len(a.Rhs) != 1 {
		return false
	}
	sel, ok := calledSelector(a.Rhs[0])
	if !ok {
		return false
	}
	recv, ok := sel.X.(*ast.Ident)
	return !ok || recv.Obj != nil || recv.Name == "queue" // a variable, or package queue
}

// dropsQueueError reports whether e calls, on a variable, a method that a
// queue, a message or a batch of them has and that returns an error.
func dropsQueueError(e *ast.ExprStmt) bool {
	sel, ok := calledSelector(e.X)
	if !ok {
		return false
	}
	if recv, ok := sel.X.(*ast.Ident); ok && recv.Obj == nil {
		return false // a package's function
	}
	errType := reflect.TypeFor[error]()
	for _, typ := range []reflect.Type{reflect.TypeFor[*queue.Queue](), reflect.TypeFor[*queue.Message](), reflect.TypeFor[queue.Messages]()} {
		if m, ok := typ.MethodByName(sel.Sel.Name); ok && m.Type.NumOut() > 0 && m.Type.Out(m.Type.NumOut()-1) == errType {
			return true
		}
	}
	return false
}

// calledSelector returns the x.f of a call x.f(…).
func calledSelector(x ast.Expr) (*ast.SelectorExpr, bool) {
	call, ok := x.(*ast.CallExpr)
	if !ok {
		return nil, false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return sel, ok
}
