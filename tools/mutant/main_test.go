package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (path relative to the tree: content) into a new
// tree and returns its root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const gate = `package gate

// Open reports whether n fits.
func (g *Gate) Open(n int) bool {
	if n <= g.free-g.held {
		return true
	}
	return false
}

type Gate struct{ free, held int }
`

// The same method after a refactor: moved to another file of its package,
// re-wrapped, re-indented and commented.
const gateMoved = `package gate

type Gate struct{ free, held int }
`
const gateOpen = `package gate

// Open reports whether n fits; what is held is not free.
func (g *Gate) Open(n int) bool {
	if n <= g.free- // what the table has
		g.held {
		return true
	}
	return false
}
`

func TestMutantSurvivesAMoveAndReformatting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		file  string
	}{
		{"as written", map[string]string{"p/gate/gate.go": gate}, "p/gate/gate.go"},
		{"moved and re-wrapped", map[string]string{"p/gate/gate.go": gateMoved, "p/gate/open.go": gateOpen}, "p/gate/open.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, tc.files)
			save := filepath.Join(t.TempDir(), "saved")
			file, err := apply(root, save, "p/gate.(*Gate).Open", "if n <= g.free-g.held {", "if n < g.free-g.held {")
			if err != nil {
				t.Fatal(err)
			}
			if file != tc.file {
				t.Errorf("changed %s, want %s", file, tc.file)
			}
			got, _ := os.ReadFile(filepath.Join(root, file))
			orig := tc.files[tc.file]
			if !strings.Contains(string(got), "if n < g.free-g.held {") || strings.Contains(string(got), "<=") {
				t.Errorf("mutant not applied:\n%s", got)
			}
			// Only the matched code changed: what is before and after it
			// is byte for byte the original.
			i := strings.Index(orig, "if n <= ")
			if !strings.HasPrefix(string(got), orig[:i]) || !strings.HasSuffix(string(got), orig[strings.Index(orig, "held {")+len("held {"):]) {
				t.Errorf("more than the mutant changed:\n%s", got)
			}
			if saved, _ := os.ReadFile(save); string(saved) != orig {
				t.Errorf("saved file is not the original:\n%s", saved)
			}
		})
	}
}

func TestStaleMutantsRefused(t *testing.T) {
	root := writeTree(t, map[string]string{
		"p/gate/gate.go": gate + `
func twice(a, b int) int {
	a++
	b++
	return a + b
}
`,
		// Test files are not searched: a declaration there is not found.
		"p/gate/gate_test.go": "package gate\n\nfunc helper() int { return 1 }\n",
		// Nor a file a default build leaves out: its tests would not
		// compile the mutant.
		"p/gate/tagged.go": "//go:build sometag\n\npackage gate\n\nfunc tagged() int { return 2 }\n",
	})
	for _, tc := range []struct{ where, old, want string }{
		{"p/gate.(*Gate).Open", "if n < g.free {", "not found"},
		{"p/gate.twice", "++", "found 2 times"},
		{"p/gate.(*Gate).Shut", "return true", "no such declaration"},
		{"p/gate.Open", "return true", "no such declaration"}, // a method, not a function
		{"p/gate.helper", "return 1", "no such declaration"},
		{"p/gate.tagged", "return 2", "no such declaration"},
		{"p/gate.twice", "return true", "not found"}, // in another declaration
		{"p/gate.twice", `"unterminated`, "not Go tokens"},
		{"p/nothere.twice", "a++", "no Go package"},
		{"gate", "a++", "want a package's directory"},
	} {
		_, err := locate(root, tc.where, tc.old)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("locate(%s, %q) = %v, want an error saying %q", tc.where, tc.old, err, tc.want)
		}
	}
	err := check(root, []string{"same", "p/gate.twice", "return a + b", "return a+b"})
	if err == nil || !strings.Contains(err.Error(), "same: p/gate.twice: the new code is the old one") {
		t.Errorf("check of a mutant that changes nothing = %v", err)
	}
	if err := check(root, []string{"fine", "p/gate.twice", "return a + b", "return a - b"}); err != nil {
		t.Errorf("check of a good mutant: %v", err)
	}
}

func TestWhereNamesTheDeclaration(t *testing.T) {
	root := writeTree(t, map[string]string{"p/q/q.go": `package q

const MaxSize = 4096

const (
	a = 1
	b = 2
)

var table = map[string]int{"x": 1}

type List[T any] struct{ items []T }

func (l *List[T]) Len() int { return len(l.items) }

func (l List[T]) First() T { return l.items[0] }

func plain() int { return a + b }
`})
	for old, want := range map[string]string{
		"const MaxSize = 4096": "p/q.MaxSize",
		"b = 2":                "p/q.b",
		`"x": 1`:               "p/q.table",
		"items []T":            "p/q.List",
		"return len(l.items)":  "p/q.(*List).Len",
		"return l.items[0]":    "p/q.List.First",
		"return a + b":         "p/q.plain",
	} {
		got, err := whereIs(root, "p/q/q.go", old)
		if err != nil || got != want {
			t.Errorf("whereIs(%q) = %q, %v; want %q", old, got, err, want)
			continue
		}
		if _, err := locate(root, got, old); err != nil {
			t.Errorf("locate(%s, %q): %v", got, old, err)
		}
	}
}
