// Package cri is the container runtime stand-in of the emulated homelab: a
// CRI v1 server on containerd's socket that has every image and runs no
// containers. It presents the kubelet stand-in's static pod processes as
// pod sandboxes so that `kubeadm reset` stops them, and decides the
// sandboxes of other pods as containerd would: the runtime handler must be
// configured and its binary present, and a pod network needs a CNI network
// loaded from /etc/cni/net.d (which its Status reports as NetworkReady).
package cri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/staticpod"
)

const (
	// RuntimeName is what Version reports; the kubelet stand-in puts it in
	// the Node's containerRuntimeVersion. RuntimeVersion is the containerd
	// release whose contract the stand-in keeps (1.x: its config dump is
	// version 2), and the one homelab checks against the declared
	// Kubernetes version: containerd tests 1.7.28 with v1.34 and v1.35.
	RuntimeName    = "homelab-cri-standin"
	RuntimeVersion = "1.7.28"
	// DefaultAddress is containerd's socket.
	DefaultAddress = "/run/containerd/containerd.sock"
	// DefaultSandboxImage is the pause image of kubeadm 1.34; kubeadm warns
	// when the runtime's differs.
	DefaultSandboxImage = "registry.k8s.io/pause:3.10.1"
)

// Config of the stand-in.
type Config struct {
	Address string // unix socket path
	// ConfigPath is containerd's config.toml (default
	// /etc/containerd/config.toml; its imports are read too).
	ConfigPath string
	// SandboxImage, CNIConfDir and CNIBinDirs override the configuration.
	SandboxImage string
	CNIConfDir   string
	CNIBinDirs   []string
	// SandboxDir holds the sandboxes of pods from the API.
	SandboxDir string
	// PodStateDir holds the kubelet stand-in's records of static pods.
	PodStateDir string
	// ImageFSDir is the directory whose filesystem ImageFsInfo reports.
	ImageFSDir string
	// StopGrace is how long a stopped sandbox gets before SIGKILL.
	StopGrace time.Duration
	// Images is what can be pulled (nil: every image, for tests); on a
	// node, the lab's image tree.
	Images *images.Store
	Logf   func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.Address == "" {
		c.Address = DefaultAddress
	}
	c.Address = strings.TrimPrefix(c.Address, "unix://")
	if c.ConfigPath == "" {
		c.ConfigPath = DefaultConfigPath
	}
	if c.SandboxDir == "" {
		c.SandboxDir = DefaultSandboxDir
	}
	if c.PodStateDir == "" {
		c.PodStateDir = staticpod.DefaultStateDir
	}
	if c.ImageFSDir == "" {
		c.ImageFSDir = "/var/lib/containerd"
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 5 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%s containerd: %s\n", time.Now().Format("2006-01-02T15:04:05.000"), fmt.Sprintf(format, args...))
		}
	}
}

// Main runs the stand-in with containerd's command line (without argv[0])
// and returns the exit code. It acts on --address (-a), --config (-c, for
// the sandbox image) and the stand-in's own --pod-state-dir; other flags are
// ignored.
func Main(args []string) int {
	c := Config{Images: &images.Store{Dir: images.Root}}
	if sub := subcommand(args); sub != nil {
		return runSubcommand(sub, args)
	}
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		switch name {
		case "v", "version":
			fmt.Printf("containerd %s %s\n", RuntimeName, RuntimeVersion)
			return 0
		case "address", "a", "config", "c", "pod-state-dir":
			if !hasVal {
				if i+1 >= len(args) {
					fmt.Fprintf(os.Stderr, "containerd: flag needs an argument: %s\n", args[i])
					return 1
				}
				i++
				val = args[i]
			}
			switch name {
			case "address", "a":
				c.Address = val
			case "config", "c":
				c.ConfigPath = val
			default:
				c.PodStateDir = val
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Serve(ctx, c); err != nil {
		fmt.Fprintf(os.Stderr, "containerd: %v\n", err)
		return 1
	}
	return 0
}

// Serve listens on c.Address until ctx ends. containerd reads its
// configuration once, at start (a changed drop-in needs a restart); only
// the CNI directory is watched, which Status reads on every call.
func Serve(ctx context.Context, c Config) error {
	c.defaults()
	rc, err := LoadRuntimeConfig(c.ConfigPath)
	if err != nil {
		return fmt.Errorf("loading config: %w", err)
	}
	if c.SandboxImage != "" {
		rc.SandboxImage = c.SandboxImage
	}
	if c.CNIConfDir != "" {
		rc.CNIConfDir = c.CNIConfDir
	}
	if len(c.CNIBinDirs) > 0 {
		rc.CNIBinDirs = c.CNIBinDirs
	}
	if err := os.MkdirAll(filepath.Dir(c.Address), 0o755); err != nil {
		return err
	}
	// A socket left by an earlier run would make Listen fail.
	if fi, err := os.Lstat(c.Address); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(c.Address)
	}
	ln, err := net.Listen("unix", c.Address)
	if err != nil {
		return err
	}
	_ = os.Chmod(c.Address, 0o660)
	srv := grpc.NewServer()
	s := newServer(c, rc)
	runtimeapi.RegisterRuntimeServiceServer(srv, &runtimeService{s: s})
	runtimeapi.RegisterImageServiceServer(srv, &imageService{s: s})
	c.Logf("serving CRI v1 on %s (sandbox image %s, CNI from %s, runtimes %v)", c.Address, rc.SandboxImage, rc.CNIConfDir, rc.handlers())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	defer os.Remove(c.Address)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
		// Streaming calls such as GetContainerEvents never end by themselves.
		srv.Stop()
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
