package ciliumagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// On a real node of the emulated homelab (real kubelet, containerd and
// runc) the stand-in runs as Cilium's own pod does: the chart's DaemonSet
// runs the lab's cilium image, whose /install-plugin.sh (the
// install-cni-binaries init container) and cilium-agent are this code.
// The agent reads cilium-config from its volume (--config-dir), reaches
// the API with its service account's CA, and only then writes the CNI
// configuration through the node's /etc/cni/net.d mounted at /host; it
// fails (the container crash-loops) while the API is unreachable, as the
// real agent does. The configuration is a real pod network of the
// reference plugins (datapath.go), kept routed to every other node.

// serviceAccountCA is where the kubelet mounts the pod's cluster CA.
const serviceAccountCA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"

// SettingsFromDir reads cilium-config as mounted in the agent's pod: a
// file per key (the ..data entries are the volume's own).
func SettingsFromDir(dir string) (Settings, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Settings{}, err
	}
	data := map[string]string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return Settings{}, err
		}
		data[e.Name()] = strings.TrimSpace(string(b))
	}
	return SettingsFrom(data), nil
}

// Node is what the agent in its pod acts on besides the files: the API
// and the node's routes.
type Node struct {
	Name string
	// Client reads the nodes; nil: the pod's in-cluster configuration.
	Client kubernetes.Interface
	// Route sets a route; nil: the node's routing table (netlink).
	Route func(dst *net.IPNet, via net.IP) error
}

// RunInPod is the agent container: ready once the API answers, then the
// CNI configuration, then it keeps the node's routes to the other nodes'
// pods until stopped.
func RunInPod(ctx context.Context, configDir, caFile, root string, node Node, logf func(string, ...any)) error {
	s, err := SettingsFromDir(configDir)
	if err != nil {
		return fmt.Errorf("reading cilium-config from %s: %w", configDir, err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("%s holds no certificate", caFile)
	}
	a := &Agent{
		TLS:       &tls.Config{RootCAs: pool},
		APIServer: net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")),
		Root:      root,
		Logf:      logf,
	}
	addr, err := a.ready(ctx, s)
	if err != nil {
		return err
	}
	if node.Client == nil {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return err
		}
		if node.Client, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	if node.Route == nil {
		node.Route = replaceRoute
	}
	self := node.Name
	written := false
	for {
		own, err := syncRoutes(ctx, node.Client, self, node.Route, logf)
		switch {
		case err != nil:
			// The agent keeps what it set up and tries again, as
			// Cilium's does while the API is away.
			logf("cilium agent stand-in: %v", err)
		case own == "":
			logf("cilium agent stand-in: node %s has no pod CIDR yet", self)
		case !written:
			conf, err := podConflist(own)
			if err != nil {
				return err
			}
			if err := a.writeConf(s, conf); err != nil {
				return err
			}
			written = true
			logf("cilium agent stand-in: API reached at %s; pods of %s get %s; wrote %s", addr, self, own, s.ConfPath)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
		}
	}
}

// MainAgent is the image's cilium-agent.
func MainAgent(args []string) int {
	fs := flag.NewFlagSet("cilium-agent", flag.ContinueOnError)
	configDir := fs.String("config-dir", "/tmp/cilium/config-map", "cilium-config as a directory")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, time.Now().UTC().Format(time.RFC3339)+" "+format+"\n", a...)
	}
	if err := RunInPod(ctx, *configDir, serviceAccountCA, hostPrefix, Node{Name: os.Getenv("K8S_NODE_NAME")}, logf); err != nil && !errors.Is(err, context.Canceled) {
		logf("%v", err)
		return 1
	}
	return 0
}

// MainInstallPlugin is the image's /install-plugin.sh: the reference
// plugins into the node's /opt/cni/bin, mounted at /host/opt/cni/bin.
func MainInstallPlugin([]string) int {
	if err := installReferencePlugins(hostPrefix); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
