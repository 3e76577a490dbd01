// Package stack runs the Pulumi program through the Automation API with an
// inline program: the language runtime is hosted in this process, so only
// the pulumi CLI binary is needed (the Go language host cannot be had on
// every machine), and the provider is this very binary under the name the
// engine looks for.
package stack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/program"
	"github.com/homelab-dev/homelab/infra/provider"
	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

// ProviderBinary is the name the engine runs the provider plugin by.
const ProviderBinary = "pulumi-resource-" + provider.Name

// Options locate the inventory, the secrets and the state.
type Options struct {
	Inventory string
	// Secrets is the bundle file; default <StateDir>/<stack>/secrets.yaml,
	// generated on first use.
	Secrets string
	// StateDir holds the local backend, the passphrase and the work dir.
	StateDir string
	// Backend is the Pulumi state backend's URL (homelab's --state): an
	// s3:// URL keeps the state, and its lock, in S3-compatible storage
	// that several operators share (docs/state.md). Default
	// $PULUMI_BACKEND_URL, else a file backend under StateDir.
	Backend string
	// Env is more environment for the engine, seen first by the backend's
	// check too (the AWS_* keys of an S3 backend); this process's own
	// environment is inherited under it.
	Env map[string]string
	// Stack name; default the inventory's cluster name.
	Stack string
	// Progress receives the engine's progress output.
	Progress io.Writer
	// Netns and CommandLog, when set, are the provider's HOMELAB_NETNS
	// (the namespace it dials the nodes from) and HOMELAB_COMMAND_LOG;
	// otherwise it inherits this process's.
	Netns, CommandLog string
}

// processEnv is this process's environment, read here, at the package's
// edge (infra/envvars' test), for backend.go.
var processEnv = os.Getenv

// DefaultStateDir is $HOMELAB_STATE_DIR, else $XDG_STATE_HOME/homelab, else
// ~/.local/state/homelab.
func DefaultStateDir() string {
	if d := os.Getenv(envvars.StateDir); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "homelab")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "homelab")
}

// Stack is an opened stack, ready for up, preview, refresh or destroy.
type Stack struct {
	s        auto.Stack
	opts     Options
	Inv      *inventory.Inventory
	Bundle   *pki.Bundle
	progress io.Writer
}

// ready clears what an earlier run killed outright left behind, before
// any operation that takes the stack's lock.
func (s *Stack) ready(ctx context.Context) error {
	return clearStaleLocks(ctx, s.opts, func(f string, a ...any) { fmt.Fprintf(s.progress, f, a...) })
}

// Open validates the inventory, loads (or creates) the secrets bundle, and
// selects the stack with its config set.
func Open(ctx context.Context, o Options) (*Stack, error) {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir()
	}
	invPath, err := filepath.Abs(o.Inventory)
	if err != nil {
		return nil, err
	}
	inv, warnings, err := inventory.Load(invPath)
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	// Consent is given per command (--allow-destroy), never inherited
	// from a shell that exported it once; so is a renewal of every
	// certificate, or each up would renew them all again.
	for env, flag := range map[string]string{provider.EnvAllowDestroy: "--allow-destroy NODE", provider.EnvRenewCertificates: "--renew-certificates", provider.EnvUpgradeWithout: "--upgrade-without NODE"} {
		if v, ok := os.LookupEnv(env); ok {
			os.Unsetenv(env)
			fmt.Fprintf(progress, "note: %s=%s from the environment is ignored; homelab up takes %s\n", env, v, flag)
		}
	}
	for _, w := range warnings {
		fmt.Fprintf(progress, "warning: %s\n", w)
	}
	if err != nil {
		return nil, err
	}
	if o.Stack == "" {
		o.Stack = inv.Cluster.Name
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return nil, err
	}
	held, err := checkBackend(ctx, o)
	if err != nil {
		return nil, err
	}
	bundle, bundleYAML, err := loadOrCreateBundle(o, progress, held)
	if err != nil {
		return nil, err
	}
	key, err := inv.SSH.ReadPrivateKey()
	if err != nil {
		return nil, err
	}
	env, err := environment(o, held)
	if err != nil {
		return nil, err
	}
	pulumiCmd, err := pulumiCommand()
	if err != nil {
		return nil, err
	}
	pluginDir, err := providerPlugin(o.StateDir)
	if err != nil {
		return nil, err
	}
	workDir := filepath.Join(o.StateDir, "work")
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, err
	}
	proj := workspace.Project{
		Name:    tokens.PackageName(program.Project),
		Runtime: workspace.NewProjectRuntimeInfo("go", nil),
		Plugins: &workspace.Plugins{Providers: []workspace.PluginOptions{{Name: provider.Name, Path: pluginDir}}},
	}
	// The program runs on the inventory loaded above, not a second read of
	// the file (the stack config below is the CLI path's, kept equal).
	run := func(pctx *pulumi.Context) error {
		cfg, err := program.NewConfig(inv, bundle, string(key), inv.SSH.KnownHosts, nil)
		if err != nil {
			return err
		}
		return program.Run(cfg)(pctx)
	}
	s, err := auto.UpsertStackInlineSource(ctx, o.Stack, program.Project, run,
		auto.Project(proj), auto.WorkDir(workDir), auto.EnvVars(env), auto.Pulumi(pulumiCmd),
		auto.SecretsProvider("passphrase"))
	if err != nil {
		return nil, fmt.Errorf("opening stack %s: %w", o.Stack, err)
	}
	cfg := auto.ConfigMap{
		program.KeyInventory:     {Value: invPath},
		program.KeySecrets:       {Value: bundleYAML, Secret: true},
		program.KeySSHPrivateKey: {Value: string(key), Secret: true},
		program.KeyKnownHosts:    {Value: inv.SSH.KnownHosts},
	}
	if err := s.SetAllConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("setting stack config: %w", err)
	}
	return &Stack{s: s, opts: o, Inv: inv, Bundle: bundle, progress: progress}, nil
}

// loadOrCreateBundle creates the bundle only for a stack the backend does
// not hold yet: a stack that exists was built with a bundle, which a new
// CA would not match on a single node.
func loadOrCreateBundle(o Options, progress io.Writer, exists stackPresence) (*pki.Bundle, string, error) {
	path := o.Secrets
	if path == "" {
		path = BundlePath(o.StateDir, o.Stack)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && o.Secrets == "" {
		if exists.found {
			return nil, "", fmt.Errorf("stack %s exists in the state backend %s, but this machine has no secrets bundle at %s: "+
				"copy the bundle the cluster was built with from the machine that built it (it is the cluster's root of trust; a new one would match no node), "+
				"then give it with --secrets FILE or put it there", o.Stack, exists.where, path)
		}
		b, err := pki.New()
		if err != nil {
			return nil, "", err
		}
		if data, err = WriteBundle(path, b); err != nil {
			return nil, "", err
		}
		fmt.Fprintf(progress, "created the cluster's secrets bundle %s (0600): back it up, it is the cluster's root of trust\n", path)
		return b, string(data), nil
	}
	if err != nil {
		return nil, "", err
	}
	b, err := pki.Parse(data)
	return b, string(data), err
}

// Parallel is how many resource operations an up runs at once, unless
// PULUMI_PARALLEL says otherwise.
const Parallel = 32

// environment keeps the engine offline and local: no update checks, no
// plugin downloads, a file backend under the state dir unless the user
// chose another, and a passphrase for secrets kept 0600 beside it, made
// only for a stack the backend does not hold yet (held).
func environment(o Options, held stackPresence) (map[string]string, error) {
	env := map[string]string{
		"PULUMI_SKIP_UPDATE_CHECK":                    "true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		"PULUMI_HOME": pulumiHome(o.StateDir),
	}
	// Given here rather than inherited, so that stacks opened side by
	// side in one process (tests on labs side by side) each reach their
	// own nodes and log to their own file.
	if o.Netns != "" {
		env[envvars.Netns] = o.Netns
	}
	if o.CommandLog != "" {
		env[envvars.CommandLog] = o.CommandLog
	}
	if os.Getenv("PULUMI_PARALLEL") == "" {
		// Pulumi runs 4 operations per CPU at once by default, sized for
		// cloud APIs; ours mostly wait on SSH commands, so on a two-core
		// machine a fresh build's seventy files were written eight at a
		// time. Measured on the 7-node lab: fresh up 1m59s at 8, 1m32s
		// at 32 (docs/provisioning.md, "How the steps reach the nodes").
		env["PULUMI_PARALLEL"] = strconv.Itoa(Parallel)
	}
	for k, v := range o.Env {
		env[k] = v
	}
	b := backendOf(o)
	if dir, ok := strings.CutPrefix(b, "file://"); ok {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	env["PULUMI_BACKEND_URL"] = b
	if lookup := envOf(o); lookup("PULUMI_CONFIG_PASSPHRASE") == "" && lookup("PULUMI_CONFIG_PASSPHRASE_FILE") == "" {
		file := filepath.Join(o.StateDir, "passphrase")
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			if held.found {
				// A new passphrase would decrypt none of the state's secrets.
				return nil, fmt.Errorf("stack %s exists in the state backend %s, but this machine has no passphrase for its secrets at %s: "+
					"copy the passphrase file from the machine that built it, or set PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE (docs/state.md)", o.Stack, held.where, file)
			}
			buf := make([]byte, 24)
			if _, err := rand.Read(buf); err != nil {
				return nil, err
			}
			if err := os.WriteFile(file, []byte(hex.EncodeToString(buf)), 0o600); err != nil {
				return nil, err
			}
		}
		env["PULUMI_CONFIG_PASSPHRASE_FILE"] = file
	}
	return env, nil
}

// pulumiCommand finds the pulumi CLI on PATH or in the tool cache.
func pulumiCommand() (auto.PulumiCommand, error) {
	if _, err := exec.LookPath("pulumi"); err != nil {
		dir := tools.Dir("pulumi")
		if _, err := os.Stat(filepath.Join(dir, "pulumi")); err != nil {
			return nil, fmt.Errorf("the pulumi CLI is not on PATH nor in %s: run infra/tools/build-pulumi.sh", dir)
		}
		os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return auto.NewPulumiCommand(&auto.PulumiCommandOptions{SkipVersionCheck: true})
}

// providerPlugin points the engine at this binary: a link named
// pulumi-resource-homelab, which main() recognises and serves the provider.
func providerPlugin(stateDir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(stateDir, "plugins")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	link := filepath.Join(dir, ProviderBinary)
	if cur, err := os.Readlink(link); err == nil && cur == self {
		return dir, nil
	}
	os.Remove(link)
	return dir, os.Symlink(self, link)
}

// Up converges the homelab. With refresh, live state is read first so
// drift on the nodes is repaired too. allowDestroy names the nodes whose
// destructive steps the user consents to for this up (provider
// EnvAllowDestroy); without it such steps are refused.
func (s *Stack) Up(ctx context.Context, refresh bool, allowDestroy ...string) (auto.UpResult, error) {
	return s.UpFor(ctx, refresh, Run{AllowDestroy: allowDestroy})
}

// Run is what one command asks for itself alone. The provider reads it
// from the environment of that run, never from the stack's config, so it
// never outlives the command.
type Run struct {
	// AllowDestroy names the nodes whose destructive steps may run
	// (provider EnvAllowDestroy).
	AllowDestroy []string
	// RenewCertificates names the control-plane nodes whose certificates
	// are renewed whatever their dates (provider EnvRenewCertificates).
	RenewCertificates []string
	// UpgradeWithout names the nodes left out of a Kubernetes upgrade
	// (provider EnvUpgradeWithout).
	UpgradeWithout []string
	// Events, when set, receives the up's engine events (not the gate's
	// preview's), and is closed after them: for a caller that times the
	// steps of exactly what `homelab up` runs (the lab benchmark).
	Events chan<- events.EngineEvent
}

// UpFor is Up with what run asks for.
func (s *Stack) UpFor(ctx context.Context, refresh bool, run Run) (auto.UpResult, error) {
	if err := s.ready(ctx); err != nil {
		return auto.UpResult{}, err
	}
	if err := s.clearPendingOperations(ctx); err != nil {
		return auto.UpResult{}, err
	}
	opts := []optup.Option{optup.ProgressStreams(s.progress), optup.ErrorProgressStreams(s.progress)}
	if refresh {
		opts = append(opts, optup.Refresh())
	}
	if run.Events != nil {
		opts = append(opts, optup.EventStreams(run.Events))
	}
	var res auto.UpResult
	err := s.withRun(run, func() (err error) {
		if err := s.gate(ctx); err != nil {
			return err
		}
		res, err = s.s.Up(ctx, opts...)
		return err
	})
	return res, explainLock(err)
}

// gate previews the update first, as `pulumi up` does unless told to skip
// it (the Automation API always skips it), so that a machine of another
// cluster or a renamed node stops the up before any node is written, not
// after the independent steps of the other nodes ran. Other preview
// errors are left to the up, which may get past them (a node found at its
// new address only once its Host is updated). No refresh: a renamed node is
// a new Host, whose dry run reads the machine, and another cluster's CA is
// an input against the CA last read; the up's own refresh reads the rest.
func (s *Stack) gate(ctx context.Context) error {
	var out bytes.Buffer
	opts := []optpreview.Option{optpreview.ProgressStreams(&out), optpreview.ErrorProgressStreams(&out)}
	if _, err := s.s.Preview(ctx, opts...); err != nil && strings.Contains(err.Error(), provider.WrongMachineMarker) {
		s.progress.Write(out.Bytes())
		return fmt.Errorf("the preview failed, so nothing was changed: %w", err)
	}
	return nil
}

// withRun runs fn with what run asks for, and nothing once fn returns:
// consent, and a renewal asked for, never outlive the command they were
// given to.
func (s *Stack) withRun(run Run, fn func() error) error {
	ws := s.s.Workspace()
	env := map[string][]string{provider.EnvAllowDestroy: run.AllowDestroy, provider.EnvRenewCertificates: run.RenewCertificates, provider.EnvUpgradeWithout: run.UpgradeWithout}
	for name, nodes := range env {
		if len(nodes) == 0 {
			ws.UnsetEnvVar(name)
			continue
		}
		ws.SetEnvVar(name, strings.Join(nodes, ","))
	}
	defer func() {
		for name := range env {
			ws.UnsetEnvVar(name)
		}
	}()
	return fn()
}

// Refusals lists the destructive steps the provider refused in a failed
// run, once each, as it worded them.
func Refusals(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		_, rest, ok := strings.Cut(line, provider.RefusedMarker)
		if !ok {
			continue
		}
		r := strings.TrimSpace(rest)
		if i := strings.Index(r, " Nothing was changed for it."); i > 0 {
			r = r[:i]
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// Refresh reads every resource's live state into the stack.
func (s *Stack) Refresh(ctx context.Context) (auto.RefreshResult, error) {
	if err := s.ready(ctx); err != nil {
		return auto.RefreshResult{}, err
	}
	res, err := s.s.Refresh(ctx, optrefresh.ProgressStreams(s.progress), optrefresh.ErrorProgressStreams(s.progress))
	return res, explainLock(err)
}

// Destroy resets the nodes (kubeadm reset, files removed): the caller has
// the user's consent for every node.
func (s *Stack) Destroy(ctx context.Context) (auto.DestroyResult, error) {
	if err := s.ready(ctx); err != nil {
		return auto.DestroyResult{}, err
	}
	var res auto.DestroyResult
	err := s.withRun(Run{AllowDestroy: []string{"*"}}, func() (err error) {
		res, err = s.s.Destroy(ctx, optdestroy.ProgressStreams(s.progress), optdestroy.ErrorProgressStreams(s.progress))
		return err
	})
	return res, explainLock(err)
}

// Auto is the underlying Automation API stack, for callers that need
// engine events or options this package does not wrap (the benchmarks).
func (s *Stack) Auto() auto.Stack { return s.s }

// Outputs returns the stack outputs (secrets in plain text: handle with care).
func (s *Stack) Outputs(ctx context.Context) (auto.OutputMap, error) { return s.s.Outputs(ctx) }

// MACs are each node's NIC MACs as the last up's Hosts read them (the
// program's macs output; nil before any up): doctor's way to find a node
// that moved when the inventory declares no MAC.
func (s *Stack) MACs(ctx context.Context) (map[string][]string, error) {
	outs, err := s.Outputs(ctx)
	if err != nil {
		return nil, err
	}
	return macsOutput(outs[program.OutputMACs].Value), nil
}

func macsOutput(v any) map[string][]string {
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := map[string][]string{}
	for node, list := range m {
		l, _ := list.([]any)
		for _, mac := range l {
			if s, ok := mac.(string); ok && s != "" {
				out[node] = append(out[node], s)
			}
		}
	}
	return out
}
