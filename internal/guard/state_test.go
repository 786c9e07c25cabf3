package guard

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// owned are the packages whose state must be owned by what opened it (a
// *thread.DB, an Agent, a Conversation, a Runner): nothing in them is
// process-wide but constants, sentinel errors and the registry of store
// drivers, as database/sql keeps its pool on the *sql.DB Open returns.
var owned = []string{"thread", "agent", "conversation", "workflow"}

// allowed are package-level variables that are state only in name, each
// with why.
var allowed = map[string]string{
	"thread.registry":   "the registry of store drivers (thread.Register), as database/sql's",
	"thread.registryMu": "the lock of that registry",
	"agent.toolName":    "a compiled regexp: immutable once built",
}

// TestNoPackageState lists every package-level variable of the owned
// packages (tests aside) and allows only sentinel errors (errors.New,
// fmt.Errorf), re-exports of package store's values, compile-time
// interface checks (var _ I = …) and the names in allowed.
func TestNoPackageState(t *testing.T) {
	for _, pkg := range owned {
		for _, v := range packageVars(t, pkg) {
			if v.name == "_" || allowed[pkg+"."+v.name] != "" || v.sentinel || v.reexport {
				continue
			}
			t.Errorf("%s: package-level variable %s.%s: state belongs to what opened it (see internal/guard)", v.pos, pkg, v.name)
		}
	}
}

// TestNoReflectOnStores checks that the packages that keep state per store
// do not reach stores by reflection: they import no reflect (agent uses it
// on tool values only, in agent.go and tool.go).
func TestNoReflectOnStores(t *testing.T) {
	for _, pkg := range owned {
		files, err := filepath.Glob(filepath.Join("..", "..", pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			base := filepath.Base(f)
			if pkg == "agent" && (base == "agent.go" || base == "tool.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "reflect" {
					t.Errorf("%s imports reflect", f)
				}
			}
		}
	}
}

type packageVar struct {
	pos      token.Position
	name     string
	sentinel bool // errors.New or fmt.Errorf, named Err… or err…
	reexport bool // store.X
}

func packageVars(t *testing.T, pkg string) []packageVar {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", pkg, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("package %s: %v (%d files)", pkg, err, len(files))
	}
	var out []packageVar
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fs := token.NewFileSet()
		af, err := parser.ParseFile(fs, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					v := packageVar{pos: fs.Position(n.Pos()), name: n.Name}
					if i < len(vs.Values) && len(vs.Names) == len(vs.Values) {
						v.sentinel = isSentinel(n.Name, vs.Values[i])
						v.reexport = isSelector(vs.Values[i], "store")
					}
					out = append(out, v)
				}
			}
		}
	}
	return out
}

func isSentinel(name string, e ast.Expr) bool {
	if !strings.HasPrefix(name, "Err") && !strings.HasPrefix(name, "err") {
		return false
	}
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	return isSelectorOf(c.Fun, "errors", "New") || isSelectorOf(c.Fun, "fmt", "Errorf")
}

func isSelector(e ast.Expr, pkg string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == pkg
}

func isSelectorOf(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	return ok && isSelector(e, pkg) && s.Sel.Name == name
}
