package engines

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated files from the table")

// root is the repository's root, from this package's directory.
const root = "../.."

func TestGeneratedFilesAreCurrent(t *testing.T) {
	docsPath := filepath.Join(root, "docs/engines.md")
	docs, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	begin := strings.Index(string(docs), DocsBegin+"\n")
	end := strings.Index(string(docs), DocsEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s: no %q ... %q block", docsPath, DocsBegin, DocsEnd)
	}
	begin += len(DocsBegin) + 1
	files := []struct{ path, got, want string }{
		{filepath.Join(root, "scripts/lib/engines.sh"), "", Shell()},
		{filepath.Join(root, "scripts/lib/engines.mk"), "", Make()},
		{docsPath, string(docs), string(docs[:begin]) + Docs() + string(docs[end:])},
	}
	for _, f := range files {
		if f.got == "" {
			b, err := os.ReadFile(f.path)
			if err != nil && !*update {
				t.Fatal(err)
			}
			f.got = string(b)
		}
		if f.got == f.want {
			continue
		}
		if *update {
			if err := os.WriteFile(f.path, []byte(f.want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", f.path)
			continue
		}
		t.Errorf("%s is not what internal/engines/engines.go gives: run go generate ./internal/engines", f.path)
	}
}

func TestTable(t *testing.T) {
	seen := map[string]bool{}
	roles := map[Role]int{}
	version := regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[a-z0-9.]+)?$`)
	for i, e := range All {
		if !regexp.MustCompile(`^[a-z][a-z0-9]*$`).MatchString(e.Name) || seen[e.Name] {
			t.Errorf("engine %d: name %q is not a unique lower-case word", i, e.Name)
		}
		seen[e.Name] = true
		// Written into bash unquoted (scripts/lib/engines.sh).
		for _, v := range []string{e.API, e.Module, e.Version, e.VersionEnv} {
			if !regexp.MustCompile(`^[A-Za-z0-9./_-]*$`).MatchString(v) {
				t.Errorf("%s: %q is not a plain word", e.Name, v)
			}
		}
		roles[e.Role]++
		if i > 0 {
			prev := All[i-1]
			if e.Major < prev.Major || apiLess(e.API, prev.API) {
				t.Errorf("%s comes after %s but is older (Docker %d, API %s)", e.Name, prev.Name, e.Major, e.API)
			}
		}
		switch e.Build {
		case Debian:
			if e.Module != "" || e.Version != "" || e.VersionEnv != "" {
				t.Errorf("%s: a Debian package has no module, version or variable", e.Name)
			}
		case DockerSource, MobySource:
			if e.Module == "" || !version.MatchString(e.Version) || !regexp.MustCompile(`^[A-Z][A-Z0-9_]*_VERSION$`).MatchString(e.VersionEnv) {
				t.Errorf("%s: a source build needs a module, a vX.Y.Z version and a NAME_VERSION variable", e.Name)
			}
		default:
			t.Errorf("%s: unknown build %q", e.Name, e.Build)
		}
		// What the engine does follows from its release.
		if e.Strict != (e.Major >= 28) || e.GatewayCheck != (e.Major >= 28) {
			t.Errorf("%s: strict and the gateway check came with Docker 28", e.Name)
		}
		if (e.CDI == NoCDI) != (e.Major < 25) {
			t.Errorf("%s: CDI came with Docker 25", e.Name)
		}
	}
	if roles[RoleOldest] != 1 || roles[RoleNewest] != 1 || All[0].Role != RoleOldest || All[len(All)-1].Role != RoleNewest {
		t.Errorf("want one oldest engine first and one newest last: %v", roles)
	}
}

// apiLess compares API versions MAJOR.MINOR.
func apiLess(a, b string) bool {
	var am, an, bm, bn int
	if _, err := fmt.Sscanf(a, "%d.%d", &am, &an); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(b, "%d.%d", &bm, &bn); err != nil {
		return false
	}
	return am < bm || am == bm && an < bn
}
