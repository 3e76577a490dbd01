package program

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/infra/hostkeys"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

// Project is the Pulumi project's name. It differs from the provider's
// package name (homelab) on purpose: the engine hands a package's config
// namespace to its provider, and the program's config (paths, the bundle)
// is none of the provider's business.
const Project = "homelab-cluster"

// Stack configuration keys. The bundle and the SSH key are secret config
// values: Pulumi encrypts them in the stack's config and state.
const (
	KeyInventory       = Project + ":inventory"
	KeySecrets         = Project + ":secrets"
	KeySSHPrivateKey   = Project + ":sshPrivateKey"
	KeyKnownHosts      = Project + ":knownHosts"
	KeyIgnorePreflight = Project + ":ignorePreflight"
)

// Main is the program both `pulumi up` and `homelab up` run: it reads the
// stack config and declares the cluster.
func Main(ctx *pulumi.Context) error {
	cfg, err := FromStackConfig(ctx)
	if err != nil {
		return err
	}
	return Run(cfg)(ctx)
}

// FromStackConfig builds the program's Config from the stack's config.
func FromStackConfig(ctx *pulumi.Context) (Config, error) {
	// Paths in stack config are the project's, as for any Pulumi program's
	// files; the Go language host runs the program in its main folder.
	root := ctx.RootDirectory()
	path, ok := ctx.GetConfig(KeyInventory)
	if !ok || path == "" {
		return Config{}, fmt.Errorf("stack config %s is not set: `pulumi config set inventory inventory/homelab.yaml` (a path relative to the project directory, or absolute)", KeyInventory)
	}
	inv, warnings, err := inventory.Load(inventory.ResolvePath(path, root))
	for _, w := range warnings {
		ctx.Log.Warn(w.Error(), nil)
	}
	if err != nil {
		return Config{}, err
	}
	bundleYAML, ok := ctx.GetConfig(KeySecrets)
	if !ok {
		return Config{}, fmt.Errorf("stack config %s is not set: `homelab secrets init -o secrets.yaml && pulumi config set --secret secrets < secrets.yaml`", KeySecrets)
	}
	if !ctx.IsConfigSecret(KeySecrets) {
		return Config{}, fmt.Errorf("stack config %s must be a secret: set it again with `pulumi config set --secret`", KeySecrets)
	}
	bundle, err := pki.Parse([]byte(bundleYAML))
	if err != nil {
		return Config{}, err
	}
	// Pulumi.yaml defaults the optional keys to "": unset.
	key, ok := ctx.GetConfig(KeySSHPrivateKey)
	if ok && key != "" && !ctx.IsConfigSecret(KeySSHPrivateKey) {
		return Config{}, fmt.Errorf("stack config %s must be a secret: set it again with `pulumi config set --secret`", KeySSHPrivateKey)
	}
	if !ok || key == "" {
		data, err := inv.SSH.ReadPrivateKey()
		if err != nil {
			return Config{}, fmt.Errorf("%w (or set %s)", err, KeySSHPrivateKey)
		}
		key = string(data)
	}
	known := inv.SSH.KnownHosts
	if k, ok := ctx.GetConfig(KeyKnownHosts); ok && k != "" {
		known = inventory.ResolvePath(k, root)
	}
	var ignore []string
	if ig, ok := ctx.GetConfig(KeyIgnorePreflight); ok && ig != "" {
		ignore = strings.Split(ig, ",")
	}
	return NewConfig(inv, bundle, key, known, ignore)
}

// NewConfig is the Config for an inventory loaded once by the caller. The
// host keys are read from known_hosts now, at each run: the user may have
// accepted a new one since the inventory was loaded.
func NewConfig(inv *inventory.Inventory, bundle *pki.Bundle, privateKey, knownHosts string, ignorePreflight []string) (Config, error) {
	if inv.Cluster.AllowCgroupV1 && !slices.Contains(ignorePreflight, "SystemVerification") {
		// kubeadm from v1.35 fails it on cgroup v1 and asks for it to be
		// skipped explicitly, besides the kubelet's failCgroupV1: false.
		ignorePreflight = append(slices.Clone(ignorePreflight), "SystemVerification")
	}
	cfg := Config{Inventory: inv, Bundle: bundle, PrivateKey: privateKey, KnownHosts: knownHosts, HostKeys: map[string]string{}, IgnorePreflight: ignorePreflight}
	if p := inv.Cluster.Packages; p.Manage && p.Keyring != "" {
		key, err := p.ReadKeyring()
		if err != nil {
			return Config{}, err
		}
		cfg.PackagesKeyring = key
	}
	if r := inv.Cluster.ContainerRuntime.RuntimeRepository(); r != nil && inv.Cluster.ContainerRuntime.Manage && r.Keyring != "" {
		key, err := inventory.ReadKeyringFile(inventory.RuntimeKeyringField, r.Keyring)
		if err != nil {
			return Config{}, err
		}
		cfg.RuntimeKeyring = key
	}
	if s3 := inv.Cluster.Etcd.SnapshotsS3(); s3 != nil {
		var err error
		if cfg.SnapshotsS3Keys, err = s3.ReadS3Credentials(); err != nil {
			return Config{}, err
		}
		if cfg.SnapshotsS3CA, err = s3.ReadS3CA(); err != nil {
			return Config{}, err
		}
	}
	for _, n := range inv.Nodes {
		fps, err := hostkeys.Known(knownHosts, hostkeys.Hosts(n.Name, n.Address, inv.SSH.Port))
		if err != nil {
			return Config{}, fmt.Errorf("known_hosts: %w", err)
		}
		slices.Sort(fps)
		cfg.HostKeys[n.Name] = strings.Join(slices.Compact(fps), ",")
	}
	return cfg, nil
}
