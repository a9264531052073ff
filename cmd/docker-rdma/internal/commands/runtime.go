package commands

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/daemonjson"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/internal/atomicfile"
)

// DefaultDaemonJSON is dockerd's config file when its --config-file is not
// given.
const DefaultDaemonJSON = "/etc/docker/daemon.json"

// recordSuffix names the record of what runtime install changed, kept
// beside the config file: /etc/docker/daemon.json.rdma-macvlan.
const recordSuffix = ".rdma-macvlan"

// The runtime's defaults (cmd/rdma-macvlan-runtime): install writes an
// option into runtimeArgs only when its value differs.
const (
	runtimeDefaultHost   = docker.DefaultHost
	runtimeDefaultCDIDir = "/var/run/cdi"
)

const runtimeUsage = `Usage:  docker rdma runtime install [--default] [--config-file PATH] [--path PATH] [--next-runtime PATH]
        docker rdma runtime uninstall [--config-file PATH]

Register the OCI runtime rdma-macvlan-runtime with dockerd as runtime
"rdma-macvlan" (docker run --runtime rdma-macvlan ...), or take it out
again, in dockerd's config file. Run it as root on the engine's host.

install sets runtimes.rdma-macvlan ({"path": ..., "runtimeArgs": [...]})
and, with --default, default-runtime. Every other member of the file stays
as it is, byte for byte and in its order. What it changed is recorded in
the file's name + ".rdma-macvlan" (/etc/docker/daemon.json.rdma-macvlan);
uninstall undoes exactly that (a member changed since is left as it is),
puts the file back byte for byte when nothing else changed, and removes
the record. Installing twice changes nothing the second time. dockerd
takes what install sets on SIGHUP, but keeps a runtime or default-runtime
that uninstall removed until it restarts.

The runtime's options go into runtimeArgs only when they are not its
defaults:
  --docker-host   the engine docker rdma talks to (-H, DOCKER_HOST, the
                  context), when it is a unix socket other than
                  /var/run/docker.sock; an engine that is not a unix
                  socket on this host is refused
  --cdi-dir       the rdma-macvlan managed plugin's cdi mount source,
                  when it is not /var/run/cdi
  --next-runtime  install's --next-runtime

Options (install):
      --default            make rdma-macvlan the default-runtime (only in
                           place of runc or none)
      --config-file PATH   dockerd's config file (default ` + DefaultDaemonJSON + `;
                           created with mode 0644 when missing)
      --path PATH          the runtime (default ` + InstalledRuntime + `)
      --next-runtime PATH  the runtime it hands containers to (default:
                           runc from PATH), e.g. nvidia-container-runtime
Options (uninstall):
      --config-file PATH   dockerd's config file (default ` + DefaultDaemonJSON + `)
`

// runtimeReload is how to make dockerd read the changed file: a SIGHUP
// reloads both members when the file has them (Docker 20.10, 28.5 and 2.0
// alike).
const runtimeReload = `apply it: dockerd reads "runtimes" and "default-runtime" again on SIGHUP:
  sudo kill -HUP $(pidof dockerd)    (or: sudo systemctl reload docker)
`

// runtimeRestart is how to make dockerd forget a runtime or
// default-runtime that is gone from the file: on SIGHUP dockerd keeps the
// value of a member the file no longer has (Docker 20.10, 28.5 and 2.0
// alike).
const runtimeRestart = `apply it: dockerd keeps a runtime and a default-runtime that are gone from the file
until it restarts (a SIGHUP does not drop them): sudo systemctl restart docker
(containers stop unless live-restore is on)
`

// cmdRuntime is docker rdma runtime install|uninstall.
func cmdRuntime(s *session, args []string) int {
	if len(args) == 0 || helpAsked(args[:1]) || args[0] == "help" {
		if len(args) == 0 {
			fmt.Fprint(s.env.Stderr, runtimeUsage)
			return exitUsage
		}
		fmt.Fprint(s.env.Stdout, runtimeUsage)
		return 0
	}
	switch args[0] {
	case "install":
		return cmdRuntimeInstall(s, args[1:])
	case "uninstall":
		return cmdRuntimeUninstall(s, args[1:])
	}
	fmt.Fprintf(s.env.Stderr, "docker rdma runtime: unknown command %q\n\n%s", args[0], runtimeUsage)
	return exitUsage
}

func runtimeFlags(s *session, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("docker rdma runtime "+name, flag.ContinueOnError)
	fs.SetOutput(s.env.Stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), runtimeUsage) }
	return fs
}

// runtimeFail prints a failure of runtime CMD and returns 1.
func runtimeFail(s *session, cmd string, err error) int {
	fmt.Fprintf(s.env.Stderr, "docker rdma runtime %s: %v\n", cmd, err)
	return 1
}

func cmdRuntimeInstall(s *session, args []string) int {
	fs := runtimeFlags(s, "install")
	makeDefault := fs.Bool("default", false, "")
	config := fs.String("config-file", s.env.daemonJSON(), "")
	bin := fs.String("path", "", "")
	next := fs.String("next-runtime", "", "")
	rest, status, ok := parseFlags(fs, args, s.env.Stdout)
	if !ok {
		return status
	}
	if len(rest) > 0 {
		fmt.Fprintf(s.env.Stderr, "docker rdma runtime install: unexpected argument %q\n\n%s", rest[0], runtimeUsage)
		return exitUsage
	}
	nextSet := false
	fs.Visit(func(f *flag.Flag) { nextSet = nextSet || f.Name == "next-runtime" })
	if nextSet && *next == "" {
		fmt.Fprintf(s.env.Stderr, "docker rdma runtime install: --next-runtime needs a runtime (a path, or a name looked up in dockerd's PATH)\n")
		return exitUsage
	}
	rt, err := runtimeEntry(s, *bin, *next)
	if err != nil {
		return runtimeFail(s, "install", err)
	}
	file, err := resolveConfig(*config)
	if err != nil {
		return runtimeFail(s, "install", err)
	}
	doc, mode, exists, err := readConfig(file)
	if err != nil {
		return runtimeFail(s, "install", err)
	}
	rec, err := readRecord(file + recordSuffix)
	if err != nil {
		return runtimeFail(s, "install", err)
	}
	out, newRec, changes, err := daemonjson.Install{Runtime: rt, Default: *makeDefault}.Apply(doc, exists, rec)
	var se *daemonjson.SyntaxError
	switch {
	case errors.As(err, &se):
		return runtimeFail(s, "install", fmt.Errorf("%s: %w; fix the file, dockerd refuses to start with it as well", file, err))
	case errors.Is(err, daemonjson.ErrDefaultRuntimeTaken):
		return runtimeFail(s, "install", fmt.Errorf("%s: %w; --default replaces only runc: %s", file, err, chainHint(doc)))
	case err != nil:
		return runtimeFail(s, "install", fmt.Errorf("%s: %w", file, err))
	}
	if len(changes) == 0 {
		fmt.Fprintf(s.env.Stdout, "%s registers runtime %s as asked already: nothing changed\n", file, daemonjson.RuntimeName)
		return 0
	}
	if !exists {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return runtimeFail(s, "install", err)
		}
	}
	rb, err := json.MarshalIndent(newRec, "", "  ")
	if err != nil {
		return runtimeFail(s, "install", err)
	}
	// The record first: a file changed without it could not be undone.
	if err := atomicfile.Write(file+recordSuffix, append(rb, '\n'), mode, nil); err != nil {
		return runtimeFail(s, "install", err)
	}
	if err := atomicfile.Write(file, out, mode, nil); err != nil {
		return runtimeFail(s, "install", err)
	}
	fmt.Fprintf(s.env.Stdout, "%s:\n", file)
	for _, c := range changes {
		if c.Before == nil {
			fmt.Fprintf(s.env.Stdout, "  + %s: %s\n", c.Key, c.After)
		} else {
			fmt.Fprintf(s.env.Stdout, "  ~ %s: %s -> %s\n", c.Key, c.Before, c.After)
		}
	}
	fmt.Fprintf(s.env.Stdout, "recorded in %s (docker rdma runtime uninstall undoes this)\n%s", file+recordSuffix, runtimeReload)
	return 0
}

func cmdRuntimeUninstall(s *session, args []string) int {
	fs := runtimeFlags(s, "uninstall")
	config := fs.String("config-file", s.env.daemonJSON(), "")
	rest, status, ok := parseFlags(fs, args, s.env.Stdout)
	if !ok {
		return status
	}
	if len(rest) > 0 {
		fmt.Fprintf(s.env.Stderr, "docker rdma runtime uninstall: unexpected argument %q\n\n%s", rest[0], runtimeUsage)
		return exitUsage
	}
	file, err := resolveConfig(*config)
	if err != nil {
		return runtimeFail(s, "uninstall", err)
	}
	doc, mode, exists, err := readConfig(file)
	if err != nil {
		return runtimeFail(s, "uninstall", err)
	}
	recFile := file + recordSuffix
	rec, err := readRecord(recFile)
	if err != nil {
		return runtimeFail(s, "uninstall", err)
	}
	if rec == nil {
		fmt.Fprintf(s.env.Stdout, "no record of docker rdma runtime install at %s: nothing to undo\n", recFile)
		var cfg struct{ Runtimes map[string]json.RawMessage }
		if exists && json.Unmarshal(doc, &cfg) == nil && cfg.Runtimes[daemonjson.RuntimeName] != nil {
			fmt.Fprintf(s.env.Stderr, "docker rdma runtime uninstall: %s has runtimes.%s, not set by docker rdma runtime install: remove it by hand if it is to go\n", file, daemonjson.RuntimeName)
		}
		return 0
	}
	u, err := daemonjson.Revert(doc, exists, rec)
	if err != nil {
		return runtimeFail(s, "uninstall", fmt.Errorf("%s: %w; the record %s stays", file, err, recFile))
	}
	switch {
	case !exists:
	case u.Remove:
		if err := atomicfile.Remove(file); err != nil {
			return runtimeFail(s, "uninstall", err)
		}
	case string(u.Content) != string(doc):
		if err := atomicfile.Write(file, u.Content, mode, nil); err != nil {
			return runtimeFail(s, "uninstall", err)
		}
	}
	if err := atomicfile.Remove(recFile); err != nil {
		return runtimeFail(s, "uninstall", err)
	}
	fmt.Fprintf(s.env.Stdout, "%s:\n", file)
	for _, c := range u.Undone {
		if c.Before == nil {
			fmt.Fprintf(s.env.Stdout, "  - %s\n", c.Key)
		} else {
			fmt.Fprintf(s.env.Stdout, "  ~ %s: %s -> %s\n", c.Key, c.After, c.Before)
		}
	}
	switch {
	case u.Whole && u.Remove:
		fmt.Fprintf(s.env.Stdout, "  (removed the file: install created it)\n")
	case u.Whole:
		fmt.Fprintf(s.env.Stdout, "  (the file is back as it was before install, byte for byte)\n")
	}
	for _, k := range u.Kept {
		now := "gone"
		if k.Now != nil {
			now = "now " + string(k.Now)
		}
		fmt.Fprintf(s.env.Stderr, "docker rdma runtime uninstall: %s: %s changed since install (%s): left as it is\n", file, k.Key, now)
	}
	fmt.Fprintf(s.env.Stdout, "removed the record %s\n", recFile)
	if len(u.Undone) > 0 && exists {
		fmt.Fprint(s.env.Stdout, reloadHint(u.Undone))
	}
	return 0
}

// reloadHint says how to make dockerd take undone changes: a restart when
// one removed a member (a SIGHUP keeps its value), else a SIGHUP.
func reloadHint(undone []daemonjson.Change) string {
	for _, c := range undone {
		if c.Before == nil {
			return runtimeRestart
		}
	}
	return runtimeReload
}

// runtimeEntry is the runtimes.rdma-macvlan entry to write: the runtime's
// path, checked, and the options that are not its defaults.
func runtimeEntry(s *session, bin, next string) (daemonjson.Runtime, error) {
	var rt daemonjson.Runtime
	ep := docker.ResolveEndpoint(s.global, s.env.Getenv, firstNonEmpty(s.env.DefaultHost, docker.DefaultHost))
	host, err := runtimeHost(ep)
	if err != nil {
		return rt, err
	}
	if next != "" && strings.Contains(next, "/") {
		if err := checkExecutable(next); err != nil {
			return rt, fmt.Errorf("--next-runtime: %w", err)
		}
	}
	if bin == "" {
		bin = s.env.installedRuntime()
		if err := checkExecutable(bin); err != nil {
			return rt, fmt.Errorf("%w; install it with make install-cli, or copy it out of the managed plugin like docker-rdma and rdma-exec: install -D -m 0755 \"$src/rdma-macvlan-runtime\" %s (src as in the README's Install), or name it with --path", err, InstalledRuntime)
		}
	} else {
		if bin, err = filepath.Abs(bin); err != nil {
			return rt, err
		}
		if err := checkExecutable(bin); err != nil {
			return rt, fmt.Errorf("--path: %w", err)
		}
	}
	cdi, err := pluginCDIDir(s)
	if err != nil {
		return rt, err
	}
	rt = daemonjson.Runtime{Path: bin, Args: runtimeArgs(host, cdi, next)}
	if len(rt.Args) > 0 {
		for _, w := range append([]string{rt.Path}, rt.Args...) {
			if !shellSafe(w) {
				return rt, fmt.Errorf("%q cannot go into runtimeArgs: dockerd writes a runtime with runtimeArgs into a shell script, unquoted (seen on Docker 20.10, 28.5 and 2.0); use a path of letters, digits and /._-", w)
			}
		}
	}
	return rt, nil
}

// runtimeHost is the engine address the runtime is to ask: the engine
// the docker CLI uses, which must be a unix socket on this host.
func runtimeHost(ep docker.Endpoint) (string, error) {
	if ep.Host == "" {
		return "", fmt.Errorf("cannot tell which engine the docker CLI uses (%s): the runtime asks that engine on its unix socket; name it with -H unix:///PATH or DOCKER_HOST", ep.Why)
	}
	sock, ok := docker.UnixSocket(ep.Host)
	if !ok {
		return "", fmt.Errorf("the engine is %s, not a unix socket on this host: the runtime asks the engine on the host it runs on; run docker rdma runtime install on the engine's host, with -H unix:///var/run/docker.sock (or that engine's socket)", ep)
	}
	return "unix://" + sock, nil
}

// runtimeArgs are the runtime's options whose values are not its
// defaults, in the order the runtime documents them.
func runtimeArgs(host, cdiDir, next string) []string {
	var args []string
	if host != runtimeDefaultHost {
		args = append(args, "--docker-host", host)
	}
	if cdiDir != runtimeDefaultCDIDir {
		args = append(args, "--cdi-dir", cdiDir)
	}
	if next != "" {
		args = append(args, "--next-runtime", next)
	}
	return args
}

// shellSafe reports whether w stays one word, as it is, in a shell
// script.
func shellSafe(w string) bool {
	if w == "" {
		return false
	}
	for _, c := range w {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-:+,=@%", c)) {
			return false
		}
	}
	return true
}

// pluginCDIDir is the host directory the rdma-macvlan managed plugin writes
// its CDI specs to (its cdi mount source), where the runtime reads them;
// the runtime's default when there is no managed plugin (the legacy plugin
// writes to the default).
func pluginCDIDir(s *session) (string, error) {
	if _, err := s.allPlugins(); err != nil {
		return "", fmt.Errorf("list the engine's plugins, to find the rdma-macvlan plugin's CDI directory: %w", err)
	}
	ps := s.rdmaPlugins()
	var on []docker.Plugin
	for _, p := range ps {
		if p.Enabled {
			on = append(on, p)
		}
	}
	if len(on) > 0 {
		ps = on
	}
	dirs := map[string][]string{}
	for _, p := range ps {
		d := filepath.Clean(firstNonEmpty(p.MountSource("cdi"), runtimeDefaultCDIDir))
		dirs[d] = append(dirs[d], p.Name)
	}
	switch len(dirs) {
	case 0:
		return runtimeDefaultCDIDir, nil
	case 1:
		for d := range dirs {
			return d, nil
		}
	}
	var say []string
	for d, names := range dirs {
		say = append(say, strings.Join(names, ", ")+" in "+d)
	}
	sort.Strings(say)
	return "", fmt.Errorf("the rdma-macvlan plugins here write their CDI specs to different directories (%s): the runtime reads one; name the plugin: docker rdma --plugin NAME runtime install", strings.Join(say, "; "))
}

// chainHint says how to run rdma-macvlan with the default-runtime set in
// doc: chained in front of it.
func chainHint(doc []byte) string {
	var cfg struct {
		Default  string `json:"default-runtime"`
		Runtimes map[string]struct {
			Path string `json:"path"`
		} `json:"runtimes"`
	}
	_ = json.Unmarshal(doc, &cfg)
	p := cfg.Runtimes[cfg.Default].Path
	if p == "" {
		p = "PATH-OF-" + cfg.Default
	}
	return fmt.Sprintf("to keep %s under rdma-macvlan, chain them: docker rdma runtime install --next-runtime %s, then set default-runtime to %s by hand (or use docker run --runtime %s)",
		cfg.Default, p, daemonjson.RuntimeName, daemonjson.RuntimeName)
}

// checkExecutable refuses a path that is not an executable file.
func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", p)
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory, not the runtime", p)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not executable (chmod 0755 %s)", p, p)
	}
	return nil
}

// resolveConfig returns the file a config path names: the target of a
// symbolic link (replacing the file must not replace the link).
func resolveConfig(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	switch {
	case err == nil:
		return real, nil
	case errors.Is(err, fs.ErrNotExist):
		return abs, nil
	}
	return "", err
}

// readConfig reads dockerd's config file; a missing one is no error
// (exists false, mode 0644: what install creates).
func readConfig(file string) (doc []byte, mode fs.FileMode, exists bool, err error) {
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0o644, false, nil
	case err != nil:
		return nil, 0, false, err
	case !fi.Mode().IsRegular():
		return nil, 0, false, fmt.Errorf("%s is not a regular file", file)
	}
	doc, err = os.ReadFile(file)
	return doc, fi.Mode().Perm(), err == nil, err
}

// readRecord reads the record of an install; nil when there is none.
func readRecord(file string) (*daemonjson.Record, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec daemonjson.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("read the record of docker rdma runtime install %s: %w (move it away to install afresh)", file, err)
	}
	if rec.Version != daemonjson.RecordVersion {
		return nil, fmt.Errorf("the record %s has version %d; this docker rdma reads version %d", file, rec.Version, daemonjson.RecordVersion)
	}
	return &rec, nil
}
