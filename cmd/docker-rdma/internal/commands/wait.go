package commands

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/docker"
	"github.com/rdma-macvlan/rdma-macvlan/cmd/docker-rdma/internal/runflags"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaexec"
)

// runNet is one rdma-macvlan network of a run.
type runNet struct {
	net  docker.Network
	view *netView
}

// InstalledHelper is where make install-cli puts rdma-exec, and where
// docker rdma run expects it on an engine's host it cannot look at.
const InstalledHelper = helperDir + "/rdma-exec"

// envGIDTimeout is the plugin setting of the daemon's GID timeout.
const envGIDTimeout = "RDMA_MACVLAN_GID_TIMEOUT"

// defaultGIDTimeout is the daemon's GID timeout when envGIDTimeout is not
// set (the driver's DefaultGIDTimeout; a test keeps them equal).
const defaultGIDTimeout = 10 * time.Second

// wrapWithHelper makes the run start rdma-exec, mounted read-only from the
// engine's host, as the container's entrypoint, with the image's (or the
// user's) entrypoint and command after it. It returns the helper's path
// on the engine's host.
func (s *session) wrapWithHelper(p *runflags.Parsed, nets []runNet) (string, error) {
	opts, err := s.helperOptions(p, nets)
	if err != nil {
		return "", err
	}
	entry, cmd, err := s.workload(p)
	if err != nil {
		return "", err
	}
	helper, err := s.helperPath(p)
	if err != nil {
		return "", err
	}
	args := []string{}
	for _, n := range nets {
		args = append(args, "--net", rdmaexec.FormatNet(n.rail()))
	}
	args = append(append(append(append(args, opts...), "--"), entry...), cmd...)
	mount := "type=bind," + csvField("source="+helper) + ",target=" + rdmaexec.ContainerPath + ",readonly"
	p.Wrap(rdmaexec.ContainerPath, []string{"--mount", mount}, args)
	return helper, nil
}

// rail is the network as rdma-exec's --net describes it.
func (n runNet) rail() rdmaexec.Network {
	rn := rdmaexec.Network{Name: n.net.Name, HCA: n.view.HCA, Port: n.view.Port,
		TrafficClass: n.view.TrafficClass, ServiceLevel: n.view.ServiceLevel}
	for _, c := range n.net.IPAM.Config {
		if pr, err := netip.ParsePrefix(c.Subnet); err == nil {
			rn.Subnets = append(rn.Subnets, pr.Masked())
		}
	}
	return rn
}

// helperOptions are rdma-exec's options after its --net options: the GID
// timeout, the RoCE version and address family asked, and whether a GID
// mismatch is accepted.
func (s *session) helperOptions(p *runflags.Parsed, nets []runNet) ([]string, error) {
	choice, err := rdmaenv.ParseChoice(p.Own.RoCEVersion, p.Own.GIDFamily)
	if err != nil {
		return nil, err
	}
	timeout, err := s.gidTimeout(p, nets)
	if err != nil {
		return nil, err
	}
	args := []string{"--timeout", timeout.String()}
	if choice.Version != rdmaenv.DefaultChoice.Version {
		args = append(args, "--roce-version", fmt.Sprint(choice.Version))
	}
	if choice.Family != "" {
		args = append(args, "--gid-family", choice.Family)
	}
	if p.Own.AcceptMismatch {
		args = append(args, "--accept-gid-mismatch")
	}
	return args, nil
}

// csvField quotes a --mount field as docker reads it (CSV).
func csvField(f string) string {
	if strings.ContainsAny(f, ",\"") {
		return `"` + strings.ReplaceAll(f, `"`, `""`) + `"`
	}
	return f
}

// gidTimeout is --gid-timeout, else the longest GID timeout of the
// networks' plugins, else the daemon's default.
func (s *session) gidTimeout(p *runflags.Parsed, nets []runNet) (time.Duration, error) {
	if p.Own.GIDTimeout != "" {
		d, err := time.ParseDuration(p.Own.GIDTimeout)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("--gid-timeout %q: want a duration such as 10s or 1m", p.Own.GIDTimeout)
		}
		return d, nil
	}
	var best time.Duration
	for _, n := range nets {
		if b := n.view.Backend; b != nil && b.Plugin != nil {
			for _, e := range b.Plugin.Settings.Env {
				if k, v, ok := strings.Cut(e, "="); ok && k == envGIDTimeout {
					if d, err := time.ParseDuration(v); err == nil && d > best {
						best = d
					}
				}
			}
		}
	}
	if best == 0 {
		best = defaultGIDTimeout
	}
	return best, nil
}

// workload returns the entrypoint and command the container would run
// without the helper: the user's --entrypoint (which drops the image's
// command, as docker run does) or the image's, and the user's command or
// the image's.
func (s *session) workload(p *runflags.Parsed) (entry, cmd []string, err error) {
	cmd = p.Command()
	if p.EntrypointSet {
		if p.Entrypoint != "" {
			entry = []string{p.Entrypoint}
		}
	} else {
		cfg, err := s.imageConfig(p)
		if err != nil {
			return nil, nil, err
		}
		entry = cfg.Entrypoint
		if len(cmd) == 0 {
			cmd = cfg.Cmd
		}
	}
	if len(entry)+len(cmd) == 0 {
		return nil, nil, fmt.Errorf("image %s has no ENTRYPOINT or CMD and no command was given", p.ImageName())
	}
	return entry, cmd, nil
}

// imageConfig inspects IMAGE, pulling it first as docker run would
// (--pull always, missing by default, never).
func (s *session) imageConfig(p *runflags.Parsed) (docker.ImageConfig, error) {
	image := p.ImageName()
	pull := strings.ToLower(p.Pull)
	if pull == "always" {
		if err := s.pull(p); err != nil {
			return docker.ImageConfig{}, err
		}
	}
	cfg, err := s.cli.ImageInspect(s.ctx, image)
	if err == nil {
		return cfg, nil
	}
	var de *docker.Error
	if !errors.As(err, &de) || !strings.Contains(strings.ToLower(de.Stderr), "no such image") {
		return cfg, fmt.Errorf("read the entrypoint and command of image %s: %w", image, err)
	}
	if pull == "never" {
		return cfg, fmt.Errorf("image %s is not on the engine and --pull=never was given", image)
	}
	if pull != "always" {
		tprintf(s.env.Stderr, "Unable to find image '%s' locally\n", image)
		if err := s.pull(p); err != nil {
			return cfg, err
		}
	}
	cfg, err = s.cli.ImageInspect(s.ctx, image)
	if err != nil {
		return cfg, fmt.Errorf("read the entrypoint and command of image %s: %w", image, err)
	}
	return cfg, nil
}

func (s *session) pull(p *runflags.Parsed) error {
	args := []string{"pull"}
	if p.Platform != "" {
		args = append(args, "--platform", p.Platform)
	}
	if p.Quiet {
		args = append(args, "--quiet")
	}
	args = append(args, "--", p.ImageName())
	cmd := exec.CommandContext(s.ctx, s.cli.Path, s.cli.Argv(args...)...)
	cmd.Stdout, cmd.Stderr = s.env.Stderr, s.env.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker pull %s: %w", p.ImageName(), err)
	}
	return nil
}

// helperPath finds rdma-exec: --exec-helper or RDMA_MACVLAN_EXEC_HELPER;
// when the engine runs here, next to docker-rdma (a build tree), in
// ../../rdma-macvlan/ from it (the install layout) or at InstalledHelper;
// when it runs on another host, InstalledHelper there (docker run fails if
// it is missing, and superviseDocker explains).
func (s *session) helperPath(p *runflags.Parsed) (string, error) {
	given := firstNonEmpty(p.Own.ExecHelper, s.env.Getenv(envExecHelper))
	local, host := s.local()
	if given != "" {
		if !filepath.IsAbs(given) {
			return "", fmt.Errorf("--exec-helper %q: give an absolute path on the engine's host", given)
		}
		if local {
			if err := checkHelper(given); err != nil {
				return "", err
			}
		}
		return given, nil
	}
	if !local {
		tprintf(s.env.Stderr, "docker rdma run: Docker runs on %s: using the rdma-exec helper at %s there (--exec-helper PATH to change it)\n", host, InstalledHelper)
		return InstalledHelper, nil
	}
	var tried []string
	if s.env.Executable != nil {
		if exe, err := s.env.Executable(); err == nil {
			if real, err := filepath.EvalSymlinks(exe); err == nil {
				exe = real
			}
			dir := filepath.Dir(exe)
			tried = append(tried, filepath.Join(dir, "rdma-exec"), filepath.Join(dir, "..", "..", "rdma-macvlan", "rdma-exec"))
		}
	}
	tried = append(tried, InstalledHelper)
	for _, t := range tried {
		if checkHelper(t) == nil {
			return filepath.Clean(t), nil
		}
	}
	return "", fmt.Errorf("the rdma-exec helper, which waits in the container for its GID entries, is not installed (looked at %s): install it with make install-cli, give its path with --exec-helper PATH, or run without it: docker rdma run --no-wait",
		strings.Join(tried, ", "))
}

func checkHelper(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("rdma-exec helper %s: %w (install it with make install-cli, or run with --no-wait)", path, err)
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("rdma-exec helper %s is not an executable file (install it with make install-cli)", path)
	}
	return nil
}
