package compose

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestConfigFilesReadsOnlyRegularEnvFiles: a .env (or --env-file) that is
// a FIFO, a link to /dev/zero or too big is refused, naming the file,
// instead of hanging on the FIFO or reading the device without end.
func TestConfigFilesReadsOnlyRegularEnvFiles(t *testing.T) {
	fifo := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifo, ".env"), 0o644); err != nil {
		t.Fatal(err)
	}
	zero := t.TempDir()
	if err := os.Symlink("/dev/zero", filepath.Join(zero, ".env")); err != nil {
		t.Fatal(err)
	}
	big := t.TempDir()
	if err := os.WriteFile(filepath.Join(big, "big.env"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A sparse file: no disk used.
	if err := os.Truncate(filepath.Join(big, "big.env"), 1<<30); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dir  string
		args *Args
		err  string
	}{
		{".env a FIFO", fifo, &Args{}, "env file " + filepath.Join(fifo, ".env") + ": read " + filepath.Join(fifo, ".env") + ": a FIFO (named pipe), not a regular file: give a regular file"},
		{".env a link to /dev/zero", zero, &Args{}, "env file " + filepath.Join(zero, ".env") + ": read " + filepath.Join(zero, ".env") + ": a character device, not a regular file"},
		{"--env-file a FIFO", zero, &Args{EnvFiles: []string{filepath.Join(fifo, ".env")}}, "a FIFO (named pipe), not a regular file"},
		{"--env-file of 1 GiB", big, &Args{EnvFiles: []string{"big.env"}}, "env file " + filepath.Join(big, "big.env") + ": read " + filepath.Join(big, "big.env") + ": 1073741824 bytes, over the"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				files []string
				err   error
			}
			done := make(chan result, 1)
			go func() {
				files, err := tc.args.ConfigFiles(func(string) string { return "" }, tc.dir)
				done <- result{files, err}
			}()
			select {
			case r := <-done:
				if r.err == nil || !strings.Contains(r.err.Error(), tc.err) {
					t.Errorf("files %q, error %v; want an error saying %q", r.files, r.err, tc.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("ConfigFiles did not return in 10 s")
			}
		})
	}
}
