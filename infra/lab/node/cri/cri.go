// Package cri is the container runtime stand-in of the emulated homelab: a
// CRI v1 server on containerd's socket that has every image, runs no
// containers, and presents the kubelet stand-in's static pod processes as
// pod sandboxes so that `kubeadm reset` stops them.
package cri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/homelab-dev/homelab/infra/lab/node/kubelet/staticpod"
)

const (
	// RuntimeName is what Version reports; the kubelet stand-in puts it in
	// the Node's containerRuntimeVersion.
	RuntimeName    = "homelab-cri-standin"
	RuntimeVersion = "0.1"
	// DefaultAddress is containerd's socket.
	DefaultAddress = "/run/containerd/containerd.sock"
	// DefaultSandboxImage is the pause image of kubeadm 1.34; kubeadm warns
	// when the runtime's differs.
	DefaultSandboxImage = "registry.k8s.io/pause:3.10.1"
)

// Config of the stand-in.
type Config struct {
	Address      string // unix socket path
	SandboxImage string
	// PodStateDir holds the kubelet stand-in's records of static pods.
	PodStateDir string
	// ImageFSDir is the directory whose filesystem ImageFsInfo reports.
	ImageFSDir string
	// StopGrace is how long a stopped sandbox gets before SIGKILL.
	StopGrace time.Duration
	Logf      func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.Address == "" {
		c.Address = DefaultAddress
	}
	c.Address = strings.TrimPrefix(c.Address, "unix://")
	if c.SandboxImage == "" {
		c.SandboxImage = DefaultSandboxImage
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
	var c Config
	var configFile string
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
				configFile = val
			default:
				c.PodStateDir = val
			}
		}
	}
	if configFile != "" {
		if b, err := os.ReadFile(configFile); err == nil {
			c.SandboxImage = sandboxImageFromConfig(string(b))
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

// sandboxImageFromConfig finds the pause image in a containerd config.toml:
// sandbox_image (containerd 1.x) or sandbox in pinned_images (2.x).
func sandboxImageFromConfig(toml string) string {
	re := regexp.MustCompile(`(?m)^\s*(?:sandbox_image|sandbox)\s*=\s*["']([^"']+)["']`)
	if m := re.FindStringSubmatch(toml); m != nil {
		return m[1]
	}
	return ""
}

// Serve listens on c.Address until ctx ends.
func Serve(ctx context.Context, c Config) error {
	c.defaults()
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
	s := newServer(c)
	runtimeapi.RegisterRuntimeServiceServer(srv, &runtimeService{s: s})
	runtimeapi.RegisterImageServiceServer(srv, &imageService{s: s})
	c.Logf("serving CRI v1 on %s (sandbox image %s)", c.Address, c.SandboxImage)

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
