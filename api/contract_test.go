package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Package api is the one contract between the daemon, the CLI, rdma-exec
// and the runtime: no other product Go file spells one of its option or
// environment variable names as a string literal; it uses the constant.
// (Names that are also plain words, "parent" and "mtu", are log field keys
// too, so only the names with an underscore are looked for.)
func TestNoCopyOfTheContract(t *testing.T) {
	fset := token.NewFileSet()
	names := map[string]string{} // value: constant
	own, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range own {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Opt") && !strings.HasPrefix(n.Name, "Env") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					if v, _ := strconv.Unquote(lit.Value); strings.Contains(v, "_") {
						names[v] = n.Name
					}
				}
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("found %d option and variable names in package api, want them all: %v", len(names), names)
	}
	err = filepath.WalkDir("..", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			switch e.Name() {
			case "api", "testdata", "build", ".git":
				if path != ".." {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		tags := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if fl, ok := n.(*ast.Field); ok && fl.Tag != nil {
				tags[fl.Tag] = true
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || tags[lit] {
				return true
			}
			if v, _ := strconv.Unquote(lit.Value); names[v] != "" {
				t.Errorf("%s: %s spells api.%s again: use the constant", fset.Position(lit.Pos()), lit.Value, names[v])
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
