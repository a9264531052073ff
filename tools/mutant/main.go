// Command mutant applies the mutants of scripts/mutate.sh. A mutant names a
// declaration of a package (WHERE) and a piece of code in it (OLD) to
// replace by NEW. OLD is found by its Go tokens, not its bytes: spaces,
// line breaks and comments do not count, and the declaration may be in any
// file of its package. So gofmt, re-wrapping a line or moving a function
// to another file of its package leaves every mutant as it is; renaming
// the declaration or moving it to another package does not.
//
// WHERE is the package's directory (from the tree's root), a dot and the
// declaration: a function ("driver/gid.moved"), a method
// ("driver/gid.(*Tracker).checkDrift", "rdma.GIDTable.FreeSlots"), or a
// name declared by a const, var or type ("driver/gid.defaultFullEvery").
// Test files are not searched, nor files a default build leaves out (a
// build tag, another GOOS): the tests would not compile a mutant there. OLD
// must occur exactly once in the declaration.
//
//	mutant apply -tree DIR -save FILE WHERE OLD NEW
//	    writes the mutant into the tree, the file as it was to FILE, and
//	    prints the file's path in the tree
//	mutant check -tree DIR NAME WHERE OLD NEW [NAME WHERE OLD NEW ...]
//	    checks that each mutant applies and changes the code (exit status
//	    1 naming each that does not), writing nothing
//	mutant where -tree DIR FILE OLD
//	    prints the WHERE of the declaration of FILE that holds the text OLD
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	tree := fs.String("tree", ".", "the tree's root")
	save := fs.String("save", "", "apply: where the file goes as it was")
	_ = fs.Parse(os.Args[2:])
	args := fs.Args()
	var err error
	switch os.Args[1] {
	case "apply":
		if len(args) != 3 || *save == "" {
			usage()
		}
		var path string
		if path, err = apply(*tree, *save, args[0], args[1], args[2]); err == nil {
			fmt.Println(path)
		}
	case "check":
		if len(args) == 0 || len(args)%4 != 0 {
			usage()
		}
		err = check(*tree, args)
	case "where":
		if len(args) != 2 {
			usage()
		}
		var where string
		if where, err = whereIs(*tree, args[0], args[1]); err == nil {
			fmt.Println(where)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutant:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: mutant apply -tree DIR -save FILE WHERE OLD NEW\n       mutant check -tree DIR NAME WHERE OLD NEW [NAME WHERE OLD NEW ...]\n       mutant where -tree DIR FILE OLD")
	os.Exit(2)
}

// apply writes the mutant into the tree and returns the path of the file
// it changed, relative to the tree.
func apply(tree, save, where, old, new string) (string, error) {
	m, err := locate(tree, where, old)
	if err != nil {
		return "", err
	}
	full := filepath.Join(tree, m.file)
	if err := os.WriteFile(save, m.src, 0o644); err != nil {
		return "", err
	}
	out := make([]byte, 0, len(m.src)+len(new))
	out = append(append(append(out, m.src[:m.start]...), new...), m.src[m.end:]...)
	return m.file, os.WriteFile(full, out, 0o644)
}

// check reports every mutant of args (NAME WHERE OLD NEW) that does not
// apply, or whose new code is the old one.
func check(tree string, args []string) error {
	var bad []string
	for i := 0; i < len(args); i += 4 {
		name, where, old, new := args[i], args[i+1], args[i+2], args[i+3]
		if _, err := locate(tree, where, old); err != nil {
			bad = append(bad, name+": "+err.Error())
		} else if tokensOf(old) == tokensOf(new) {
			bad = append(bad, fmt.Sprintf("%s: %s: the new code is the old one: %q", name, where, new))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "\n"))
	}
	return nil
}

// tokensOf is text's tokens, one per line, for comparing two texts.
func tokensOf(text string) string {
	toks, err := scan([]byte(text), 0)
	if err != nil {
		return text
	}
	var b strings.Builder
	for _, t := range toks {
		fmt.Fprintf(&b, "%d %s\n", t.tok, t.lit)
	}
	return b.String()
}

// match is where OLD is: its file (relative to the tree), that file's
// bytes, and OLD's byte range in them.
type match struct {
	file       string
	src        []byte
	start, end int
}

// locate finds old in the declaration where names, exactly once.
func locate(tree, where, old string) (match, error) {
	dir, name, err := splitWhere(where)
	if err != nil {
		return match{}, err
	}
	pat, err := scan([]byte(old), 0)
	if err != nil {
		return match{}, fmt.Errorf("%s: the old text is not Go tokens (%v): %q", where, err, old)
	}
	if len(pat) == 0 {
		return match{}, fmt.Errorf("%s: the old text is empty", where)
	}
	decls, err := declsOf(filepath.Join(tree, dir))
	if err != nil {
		return match{}, fmt.Errorf("%s: %w", where, err)
	}
	var found []decl
	for _, d := range decls {
		if d.name == name {
			found = append(found, d)
		}
	}
	switch {
	case len(found) == 0:
		return match{}, fmt.Errorf("%s: no such declaration in %s: update the mutant", where, dir)
	case len(found) > 1:
		return match{}, fmt.Errorf("%s: declared %d times in %s", where, len(found), dir)
	}
	d := found[0]
	toks, err := scan(d.src[d.start:d.end], d.start)
	if err != nil {
		return match{}, fmt.Errorf("%s: %w", where, err)
	}
	var at []int
	for i := 0; i+len(pat) <= len(toks); i++ {
		if sameTokens(toks[i:i+len(pat)], pat) {
			at = append(at, i)
		}
	}
	switch {
	case len(at) == 0:
		return match{}, fmt.Errorf("%s: old text not found: update the mutant: %q", where, old)
	case len(at) > 1:
		return match{}, fmt.Errorf("%s: old text found %d times: make it unique: %q", where, len(at), old)
	}
	first, last := toks[at[0]], toks[at[0]+len(pat)-1]
	rel, _ := filepath.Rel(tree, d.file)
	return match{file: rel, src: d.src, start: first.off, end: last.off + last.size}, nil
}

// splitWhere splits "dir.Decl" at the first dot after the last slash.
func splitWhere(where string) (dir, name string, err error) {
	slash := strings.LastIndex(where, "/")
	dot := strings.Index(where[slash+1:], ".")
	if dot < 0 || where[slash+1+dot+1:] == "" {
		return "", "", fmt.Errorf("%q: want a package's directory, a dot and a declaration (driver/gid.(*Tracker).checkDrift)", where)
	}
	dir, name = where[:slash+1+dot], where[slash+1+dot+1:]
	if dir == "" {
		dir = "."
	}
	return dir, name, nil
}

// decl is one declaration of a package: its name as WHERE spells it, and
// its byte range in its file.
type decl struct {
	name       string
	file       string
	src        []byte
	start, end int
}

// declsOf lists the declarations of the package in dir (test files, and
// files the default build context leaves out, left out): functions,
// methods and the names of const, var and type specs.
func declsOf(dir string) ([]decl, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var decls []decl
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, filepath.Base(path)); err != nil || !ok {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		off := func(p token.Pos) int { return fset.Position(p).Offset }
		add := func(name string, node ast.Node) {
			decls = append(decls, decl{name: name, file: path, src: src, start: off(node.Pos()), end: off(node.End())})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				add(recvOf(d)+d.Name.Name, d)
			case *ast.GenDecl:
				// A spec of a group is its own range; an ungrouped one
				// has its keyword ("const MaxSize = 4096").
				for _, s := range d.Specs {
					var node ast.Node = s
					if !d.Lparen.IsValid() {
						node = d
					}
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n.Name, node)
						}
					case *ast.TypeSpec:
						add(s.Name.Name, node)
					}
				}
			}
		}
	}
	if len(decls) == 0 {
		return nil, fmt.Errorf("no Go package in %s", dir)
	}
	return decls, nil
}

// recvOf is a method's receiver as WHERE spells it, with its dot: "(*T)."
// or "T."; "" for a function.
func recvOf(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	t := d.Recv.List[0].Type
	star := false
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = true, s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	id, _ := t.(*ast.Ident)
	if id == nil {
		return "?."
	}
	if star {
		return "(*" + id.Name + ")."
	}
	return id.Name + "."
}

// tok is one token: its kind, its text where the kind does not say it, and
// its byte range (off, size) in the file.
type tok struct {
	tok       token.Token
	lit       string
	off, size int
}

// scan is src's tokens, comments and the semicolons Go inserts at line
// ends left out; base is src's offset in its file.
func scan(src []byte, base int) ([]tok, error) {
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(src))
	var errs scanner.ErrorList
	var s scanner.Scanner
	s.Init(file, src, func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	var toks []tok
	for {
		pos, t, lit := s.Scan()
		if t == token.EOF {
			break
		}
		if t == token.SEMICOLON && lit == "\n" {
			continue
		}
		off := file.Offset(pos)
		size := len(lit)
		if lit == "" || t.IsKeyword() {
			size = len(t.String())
		}
		// A literal's text as written (the scanner drops a raw string's
		// carriage returns).
		if t == token.STRING || t == token.CHAR {
			size = literalEnd(src, off) - off
		}
		toks = append(toks, tok{tok: t, lit: lit, off: base + off, size: size})
	}
	if len(errs) > 0 {
		return nil, errs.Err()
	}
	return toks, nil
}

// literalEnd is the offset just past the string or rune literal that
// starts at off.
func literalEnd(src []byte, off int) int {
	q := src[off]
	for i := off + 1; i < len(src); i++ {
		switch {
		case src[i] == '\\' && q != '`':
			i++
		case src[i] == q:
			return i + 1
		}
	}
	return len(src)
}

func sameTokens(a, b []tok) bool {
	for i := range a {
		if a[i].tok != b[i].tok || a[i].lit != b[i].lit {
			return false
		}
	}
	return true
}

// whereIs is the WHERE of the declaration of file (relative to the tree)
// whose range holds the text old, which must occur there exactly once.
func whereIs(tree, file, old string) (string, error) {
	path := filepath.Join(tree, file)
	src, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	i := bytes.Index(src, []byte(old))
	if i < 0 || bytes.Contains(src[i+1:], []byte(old)) {
		return "", fmt.Errorf("%s: the text is not there exactly once: %q", file, old)
	}
	decls, err := declsOf(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(file)
	if dir == "." {
		return "", fmt.Errorf("%s: a package in the tree's root has no directory to name in WHERE", file)
	}
	for _, d := range decls {
		if d.file == path && d.start <= i && i+len(old) <= d.end {
			return dir + "." + d.name, nil
		}
	}
	return "", fmt.Errorf("%s: the text is in no declaration: %q", file, old)
}
