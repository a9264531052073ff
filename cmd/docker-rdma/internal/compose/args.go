package compose

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/runflags"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/userfile"
)

// Args is a `docker rdma compose` command line taken apart.
type Args struct {
	// Own are docker rdma's options (the ones docker rdma run has), and
	// PrintOverride its --print-override.
	Own           runflags.Own
	PrintOverride bool
	// Global are compose's own options before COMMAND, as given.
	Global []string
	// Files are the -f/--file values, ProjectDir --project-directory (or
	// the deprecated --workdir).
	Files      []string
	ProjectDir string
	// EnvFiles are the --env-file values (compose reads .env in the
	// project directory when none is given).
	EnvFiles []string
	// Command is compose's COMMAND ("" when none is given) and Rest the
	// arguments after it.
	Command string
	Rest    []string
}

// ErrUsage marks a command line docker rdma compose cannot take.
var ErrUsage = errors.New("invalid docker rdma compose arguments")

var (
	ownBool = map[string]bool{"no-wait": true, "print-override": true, "accept-gid-mismatch": true}
	// composeValue and composeBool are docker compose's global options
	// (Compose v2.40), long names; -f, -p take a value too.
	composeValue = map[string]bool{"ansi": true, "env-file": true, "file": true, "parallel": true, "profile": true,
		"progress": true, "project-directory": true, "project-name": true, "workdir": true}
	composeBool = map[string]bool{"compatibility": true, "dry-run": true, "all-resources": true, "verbose": true,
		"no-ansi": true, "debug": true, "insecure": true}
)

// ParseArgs reads the arguments after `docker rdma compose`.
func ParseArgs(args []string) (*Args, error) {
	a := &Args{}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			a.Command, a.Rest = arg, args[i+1:]
			return a, nil
		}
		var name, val string
		var hasVal bool
		switch {
		case strings.HasPrefix(arg, "--"):
			name, val, hasVal = strings.Cut(arg[2:], "=")
		case arg == "-f" || arg == "-p":
			name = map[string]string{"-f": "file", "-p": "project-name"}[arg]
		case strings.HasPrefix(arg, "-f") || strings.HasPrefix(arg, "-p"):
			name = map[byte]string{'f': "file", 'p': "project-name"}[arg[1]]
			val, hasVal = strings.TrimPrefix(arg[2:], "="), true
		default:
			return nil, fmt.Errorf("%w: unknown option %s before COMMAND (give docker compose's own command options after COMMAND)", ErrUsage, arg)
		}
		takes := runflags.OwnValue[name] || composeValue[name]
		if !takes && !ownBool[name] && !composeBool[name] {
			return nil, fmt.Errorf("%w: unknown option %s before COMMAND (docker rdma compose knows docker compose's global options and its own: see docker rdma compose --help)", ErrUsage, arg)
		}
		if takes && !hasVal {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%w: option %s needs a value", ErrUsage, arg)
			}
			i++
			val = args[i]
		}
		if runflags.OwnValue[name] || ownBool[name] {
			if err := a.setOwn(name, val, hasVal); err != nil {
				return nil, err
			}
			continue
		}
		a.Global = append(a.Global, "--"+name)
		if takes {
			a.Global = append(a.Global, val)
		} else if hasVal {
			a.Global[len(a.Global)-1] += "=" + val
		}
		switch name {
		case "file":
			a.Files = append(a.Files, val)
		case "project-directory", "workdir":
			a.ProjectDir = val
		case "env-file":
			a.EnvFiles = append(a.EnvFiles, val)
		}
	}
	return a, nil
}

func (a *Args) setOwn(name, val string, hasVal bool) error {
	if ownBool[name] {
		on := !hasVal || val == "true" || val == "1"
		if hasVal && !on && val != "false" && val != "0" {
			return fmt.Errorf("%w: --%s takes no value (or =true/=false), got %q", ErrUsage, name, val)
		}
		switch name {
		case "no-wait":
			a.Own.NoWait = on
		case "print-override":
			a.PrintOverride = on
		case "accept-gid-mismatch":
			a.Own.AcceptMismatch = on
		}
		return nil
	}
	return a.Own.SetValue(name, val, ErrUsage)
}

// NeedsOverride reports whether a compose command creates containers (or
// shows the model), so that the override goes with it. The others (down,
// ps, logs, exec, stop, ...) run as they are.
func NeedsOverride(cmd string) bool {
	switch cmd {
	case "up", "create", "run", "scale", "watch", "config", "convert":
		return true
	}
	return false
}

// Default file names, as compose looks for them (compose-spec's loader).
var (
	defaultFiles  = []string{"compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml"}
	overrideFiles = []string{"compose.override.yml", "compose.override.yaml", "docker-compose.override.yml", "docker-compose.override.yaml"}
)

// ConfigFiles are the files compose reads without docker rdma's override:
// the -f files; else COMPOSE_FILE (split on COMPOSE_PATH_SEPARATOR, ":" by
// default) from the environment, else from the env files (--env-file, or
// .env in the project directory), as compose takes it from there too;
// else, as compose does, the first of compose.yaml,
// compose.yml, docker-compose.yml and docker-compose.yaml in the project
// directory (else the working directory) or the nearest parent that has
// one, with its compose.override.yml (or .yaml, docker-compose.override.*)
// beside it. Giving -f with the override drops compose's own look-up, so
// these must be named too.
func (a *Args) ConfigFiles(getenv func(string) string, wd string) ([]string, error) {
	if len(a.Files) > 0 {
		return a.Files, nil
	}
	dir := wd
	if a.ProjectDir != "" {
		dir = a.ProjectDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(wd, dir)
		}
	}
	envFiles := a.EnvFiles
	if len(envFiles) == 0 {
		envFiles = []string{filepath.Join(dir, ".env")}
	}
	fromFiles, err := readEnvFiles(envFiles, wd, len(a.EnvFiles) > 0)
	if err != nil {
		return nil, err
	}
	lookup := func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return fromFiles[k]
	}
	if f := lookup("COMPOSE_FILE"); f != "" {
		sep := lookup("COMPOSE_PATH_SEPARATOR")
		if sep == "" {
			sep = string(os.PathListSeparator)
		}
		return strings.Split(f, sep), nil
	}
	for {
		if f := first(dir, defaultFiles); f != "" {
			files := []string{f}
			if o := first(dir, overrideFiles); o != "" {
				files = append(files, o)
			}
			return files, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("no compose file: none of %s in %s or a parent directory (give one with -f FILE)", strings.Join(defaultFiles, ", "), wd)
		}
		dir = parent
	}
}

// readEnvFiles reads KEY=VALUE lines of env files (later files win; blank
// lines and # comments skipped; one pair of surrounding quotes taken off).
// A missing file is an error only when the user named it.
func readEnvFiles(files []string, wd string, named bool) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range files {
		if !filepath.IsAbs(f) {
			f = filepath.Join(wd, f)
		}
		b, err := userfile.Read(f, userfile.MaxSize)
		if err != nil {
			if !named && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("env file %s: %w", f, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "export "))
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			v = strings.TrimSpace(v)
			if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
				v = v[1 : len(v)-1]
			}
			out[strings.TrimSpace(k)] = v
		}
	}
	return out, nil
}

func first(dir string, names []string) string {
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
