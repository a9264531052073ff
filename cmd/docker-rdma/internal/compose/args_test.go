package compose

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs(strings.Fields("-f a.yml --memlock 8M -p proj --file=b.yml --no-wait --profile x --dry-run --gid-timeout 30s --project-directory /srv up -d --wait"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Fields("--file a.yml --project-name proj --file b.yml --profile x --dry-run --project-directory /srv"); !reflect.DeepEqual(a.Global, want) {
		t.Errorf("global %q, want %q", a.Global, want)
	}
	if !reflect.DeepEqual(a.Files, []string{"a.yml", "b.yml"}) || a.ProjectDir != "/srv" {
		t.Errorf("files %q, project dir %q", a.Files, a.ProjectDir)
	}
	if a.Own.Memlock != "8M" || !a.Own.NoWait || a.Own.GIDTimeout != "30s" {
		t.Errorf("own %+v", a.Own)
	}
	if a.Command != "up" || !reflect.DeepEqual(a.Rest, []string{"-d", "--wait"}) {
		t.Errorf("command %q %q", a.Command, a.Rest)
	}
	a, err = ParseArgs([]string{"-fa.yml", "--print-override"})
	if err != nil || !a.PrintOverride || a.Command != "" || !reflect.DeepEqual(a.Files, []string{"a.yml"}) {
		t.Errorf("-fa.yml --print-override: %+v, %v", a, err)
	}
	for _, bad := range [][]string{{"-d", "up"}, {"--memlock"}, {"--device-mode", "x", "up"}, {"--no-wait=maybe", "up"}} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConfigFiles(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"docker-compose.yml", "compose.yaml", "compose.override.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	a := &Args{}
	got, err := a.ConfigFiles(getenv, sub)
	if want := []string{filepath.Join(dir, "compose.yaml"), filepath.Join(dir, "compose.override.yaml")}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("look-up from a subdirectory: %q, %v; want %q", got, err, want)
	}
	env["COMPOSE_FILE"] = "x.yml;y.yml"
	env["COMPOSE_PATH_SEPARATOR"] = ";"
	if got, _ := a.ConfigFiles(getenv, sub); !reflect.DeepEqual(got, []string{"x.yml", "y.yml"}) {
		t.Errorf("COMPOSE_FILE: %q", got)
	}
	a.Files = []string{"z.yml"}
	if got, _ := a.ConfigFiles(getenv, sub); !reflect.DeepEqual(got, []string{"z.yml"}) {
		t.Errorf("-f: %q", got)
	}
	if _, err := (&Args{}).ConfigFiles(func(string) string { return "" }, t.TempDir()); err == nil || !strings.Contains(err.Error(), "give one with -f FILE") {
		t.Errorf("no file: %v", err)
	}
}

// COMPOSE_FILE set in the project's .env (or an --env-file) names the
// files, as compose reads them; the environment wins over the file; a
// named env file that is missing is an error, a missing .env is not.
func TestConfigFilesFromEnvFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("# stack\nCOMPOSE_PATH_SEPARATOR=';'\nexport COMPOSE_FILE=\"base.yml;gpu.yml\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if got, err := (&Args{}).ConfigFiles(getenv, dir); err != nil || !reflect.DeepEqual(got, []string{"base.yml", "gpu.yml"}) {
		t.Errorf(".env's COMPOSE_FILE: %q, %v", got, err)
	}
	env["COMPOSE_FILE"] = "mine.yml"
	if got, _ := (&Args{}).ConfigFiles(getenv, dir); !reflect.DeepEqual(got, []string{"mine.yml"}) {
		t.Errorf("the environment's COMPOSE_FILE: %q", got)
	}
	delete(env, "COMPOSE_FILE")
	if err := os.WriteFile(filepath.Join(dir, "other.env"), []byte("COMPOSE_FILE=x.yml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := (&Args{EnvFiles: []string{"other.env"}}).ConfigFiles(getenv, dir); !reflect.DeepEqual(got, []string{"x.yml"}) {
		t.Errorf("--env-file's COMPOSE_FILE: %q", got)
	}
	if _, err := (&Args{EnvFiles: []string{"missing.env"}}).ConfigFiles(getenv, dir); err == nil {
		t.Error("a missing --env-file was taken")
	}
	if got, err := (&Args{}).ConfigFiles(getenv, t.TempDir()); err == nil {
		t.Errorf("no .env, no compose file: %q, want the no-file error", got)
	}
}
