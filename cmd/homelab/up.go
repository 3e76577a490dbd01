package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/homelab-dev/homelab/infra/clusterlock"
	"github.com/homelab-dev/homelab/infra/netns"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/infra/verify"
	"github.com/homelab-dev/homelab/inventory"
)

func init() {
	subcommands = append(subcommands, newUpCommand, newPreviewCommand, newRefreshCommand, newDestroyCommand, newKubeconfigCommand, newVerifyCommand)
}

type stackFlags struct {
	inventory, secrets, stateDir, state, stack string
}

func (f *stackFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.inventory, "file", "f", "", "inventory file (YAML)")
	_ = cmd.MarkFlagRequired("file")
	cmd.Flags().StringVar(&f.secrets, "secrets", "", "secrets bundle (default: <state-dir>/<stack>/secrets.yaml, created on first up)")
	cmd.Flags().StringVar(&f.stateDir, "state-dir", "", "where the local Pulumi backend, passphrase and bundle live (default "+stack.DefaultStateDir()+")")
	cmd.Flags().StringVar(&f.state, "state", "", "the Pulumi state backend, shared by operators: s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT&region=us-east-1&s3ForcePathStyle=true, keys from AWS_ACCESS_KEY_ID or a profile (default $PULUMI_BACKEND_URL, else a file backend in --state-dir; docs/state.md)")
	cmd.Flags().StringVar(&f.stack, "stack", "", "stack name (default: the inventory's cluster name)")
}

// needsFiles marks a command that runs the program, which reads every
// file the inventory names: they are checked before anything is created
// or run, all missing ones named at once.
const needsFiles = "homelab/needs-files"

func (f *stackFlags) open(cmd *cobra.Command) (*stack.Stack, context.Context, context.CancelFunc, error) {
	if cmd.Annotations[needsFiles] != "" {
		// stack.Open prints the warnings.
		if _, err := loadInventoryWithFiles(f.inventory, io.Discard); err != nil {
			return nil, nil, nil, err
		}
	}
	ctx, cancel := interruptible(cmd.Context(), cmd.ErrOrStderr())
	s, err := stack.Open(ctx, stack.Options{Inventory: f.inventory, Secrets: f.secrets, StateDir: f.stateDir, Backend: f.state, Stack: f.stack, Progress: cmd.OutOrStdout()})
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return s, ctx, cancel, nil
}

// interruptible is the context of a command that changes nodes. The first
// Ctrl-C (or SIGTERM) asks the engine to stop the way it can safely: the
// node steps already running finish, and no new one starts. Only a second
// one aborts; even then kubeadm and apt runs go on on their nodes, in their
// own sessions, and the next up waits for them.
func interruptible(parent context.Context, errw io.Writer) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer signal.Stop(sigs)
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		fmt.Fprintln(errw, "\ninterrupted: the node steps already running finish, no new one starts (Ctrl-C again to abort them)")
		stack.SignalCLI(syscall.SIGINT)
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		fmt.Fprintln(errw, "\naborting: kubeadm and apt runs already started go on on their nodes; the next up waits for them")
		cancel()
	}()
	return ctx, cancel
}

// addRenewFlag is --renew-certificates, for up and preview.
func addRenewFlag(cmd *cobra.Command, nodes *[]string) {
	cmd.Flags().StringSliceVar(nodes, "renew-certificates", nil, "renew every kubeadm certificate on the control-plane nodes now, whatever their dates (after a key leak, or to rehearse), one node at a time; "+
		"--renew-certificates=NODE[,NODE] for some. Certificates within cluster.certificates.renewBefore of expiry are renewed by every up anyway")
	cmd.Flags().Lookup("renew-certificates").NoOptDefVal = "*"
}

// addUpgradeWithoutFlag is --upgrade-without, for up and preview.
func addUpgradeWithoutFlag(cmd *cobra.Command, nodes *[]string) {
	cmd.Flags().StringSliceVar(nodes, "upgrade-without", nil, "NODE[,NODE]: leave these nodes (powered off, say) out of this up's Kubernetes upgrade, which otherwise refuses to start while a member cannot be read; they upgrade on a later up")
}

// checkNodes refuses names that are no node of the inventory, all at once.
func checkNodes(inv *inventory.Inventory, flag string, nodes []string) error {
	var bad []string
	for _, n := range nodes {
		if _, ok := inv.Node(n); !ok {
			bad = append(bad, n)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: %s: no node of the inventory", flag, strings.Join(bad, ", "))
	}
	return nil
}

// checkRenewNodes refuses names that are not control-plane nodes, all at
// once: a typo would otherwise renew nothing, silently.
func checkRenewNodes(inv *inventory.Inventory, nodes []string) error {
	var cps, bad []string
	for _, n := range inv.ControlPlanes() {
		cps = append(cps, n.Name)
	}
	for _, n := range nodes {
		if n != "*" && !slices.Contains(cps, n) {
			bad = append(bad, n)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("--renew-certificates: %s: not a control-plane node of the inventory (kubeadm's certificates are on %s; a worker's kubelet rotates its own)",
			strings.Join(bad, ", "), strings.Join(cps, ", "))
	}
	return nil
}

func newUpCommand() *cobra.Command {
	var refresh, skipVerify, breakLock bool
	var allow, renew, without []string
	cmd := stackCommand("up -f FILE", "Converge the nodes to the inventory (the same program as `pulumi up`), then verify the cluster", func(ctx context.Context, cmd *cobra.Command, s *stack.Stack) error {
		if err := checkRenewNodes(s.Inv, renew); err != nil {
			return err
		}
		if err := checkNodes(s.Inv, "--upgrade-without", without); err != nil {
			return err
		}
		start := time.Now()
		var res auto.UpResult
		err := withClusterLock(ctx, cmd, s.Inv, clusterlock.Options{Break: breakLock}, func() (err error) {
			res, err = s.UpFor(ctx, refresh, stack.Run{AllowDestroy: allow, RenewCertificates: renew, UpgradeWithout: without})
			return err
		})
		if refusals := stack.Refusals(err); len(refusals) > 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "\nrefused: destructive steps, each needing your consent for its node (nothing else was held back):")
			for _, r := range refusals {
				fmt.Fprintln(cmd.ErrOrStderr(), "  "+r)
			}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "\nup took %s: %v\n", time.Since(start).Round(time.Millisecond), *res.Summary.ResourceChanges)
		if skipVerify {
			return nil
		}
		return verifyAndReport(ctx, cmd, s, res.Outputs)
	})
	cmd.Flags().BoolVar(&refresh, "refresh", true, "read every resource's live state first, so drift on the nodes is repaired")
	cmd.Flags().BoolVar(&skipVerify, "skip-verify", false, "do not verify the cluster afterwards")
	cmd.Flags().StringSliceVar(&allow, "allow-destroy", nil, "NODE[,NODE]: consent, for this up only, to the destructive steps on these nodes that the plan needs (a reset, an etcd member removed, key files deleted, an unreachable node forgotten); preview lists them")
	addRenewFlag(cmd, &renew)
	addUpgradeWithoutFlag(cmd, &without)
	addBreakLockFlag(cmd, &breakLock)
	cmd.Annotations = map[string]string{needsFiles: "true"}
	return cmd
}

// verifyAndReport verifies the cluster with the stack's outputs: those an
// up just returned, or (nil) read from the stack, two more runs of the CLI.
func verifyAndReport(ctx context.Context, cmd *cobra.Command, s *stack.Stack, outs auto.OutputMap) error {
	if outs == nil {
		var err error
		if outs, err = s.Outputs(ctx); err != nil {
			return err
		}
	}
	kc, _ := outs["kubeconfig"].Value.(string)
	rep, verr := verify.Run(ctx, verify.Target{Inventory: s.Inv, Bundle: s.Bundle, Kubeconfig: []byte(kc), Dial: dialer()})
	out := cmd.OutOrStdout()
	if rep != nil {
		fmt.Fprintln(out, "\nverify:")
		for _, c := range rep.Checks {
			mark := "ok  "
			if !c.OK {
				mark = "FAIL"
			}
			fmt.Fprintf(out, "  %s %s", mark, c.Name)
			if c.Detail != "" {
				fmt.Fprintf(out, ": %s", c.Detail)
			}
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "\nendpoint:     https://%s\nnodes:        %v\netcd members: %v\n", s.Inv.Endpoint(), rep.Nodes, rep.EtcdMembers)
	}
	return verr
}

// commandLog is the file HOMELAB_COMMAND_LOG names: every command run on
// a node is appended to it. Read here, at the edge, and handed down.
func commandLog() string { return os.Getenv(ssh.CommandLogEnv) }

// dialer reaches the nodes from the namespace in HOMELAB_NETNS (the
// emulated homelab's gateway), else directly.
func dialer() verify.DialFunc {
	if ns := os.Getenv(ssh.NetnsEnv); ns != "" {
		return netns.DialerFor(ns)
	}
	return (&net.Dialer{Timeout: 10 * time.Second}).DialContext
}

// stackCommand is a command that opens the inventory's stack and runs on it.
func stackCommand(use, short string, run func(ctx context.Context, cmd *cobra.Command, s *stack.Stack) error) *cobra.Command {
	var f stackFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, ctx, cancel, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			return run(ctx, cmd, s)
		},
	}
	f.add(cmd)
	return cmd
}

func newPreviewCommand() *cobra.Command {
	var refresh bool
	var renew, without []string
	cmd := stackCommand("preview -f FILE", "Show what up would change on which node", func(ctx context.Context, cmd *cobra.Command, s *stack.Stack) error {
		if err := checkRenewNodes(s.Inv, renew); err != nil {
			return err
		}
		if err := checkNodes(s.Inv, "--upgrade-without", without); err != nil {
			return err
		}
		changes, err := s.PreviewChangesFor(ctx, refresh, stack.Run{RenewCertificates: renew, UpgradeWithout: without})
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "\n%d change(s):\n", len(changes))
		var nodes []string
		for _, c := range changes {
			fmt.Fprintf(out, "  %s\n", c)
			if c.Destroys != "" && !slices.Contains(nodes, c.Node) {
				nodes = append(nodes, c.Node)
			}
		}
		if len(nodes) > 0 {
			fmt.Fprintf(out, "\nDESTRUCTIVE steps above: up refuses them unless you consent for exactly those nodes: homelab up --allow-destroy %s\n", strings.Join(nodes, ","))
		}
		return nil
	})
	cmd.Flags().BoolVar(&refresh, "refresh", true, "read live state first, so drift shows")
	addRenewFlag(cmd, &renew)
	addUpgradeWithoutFlag(cmd, &without)
	cmd.Annotations = map[string]string{needsFiles: "true"}
	return cmd
}

func newRefreshCommand() *cobra.Command {
	return stackCommand("refresh -f FILE", "Read every resource's live state from the nodes into the stack", func(ctx context.Context, _ *cobra.Command, s *stack.Stack) error {
		_, err := s.Refresh(ctx)
		return err
	})
}

func newDestroyCommand() *cobra.Command {
	var yes, breakLock bool
	cmd := stackCommand("destroy -f FILE", "Reset every node (kubeadm reset, files removed) so a later up starts clean", func(ctx context.Context, cmd *cobra.Command, s *stack.Stack) error {
		if err := confirmDestroy(cmd, s.Inv, yes); err != nil {
			return err
		}
		return withClusterLock(ctx, cmd, s.Inv, clusterlock.Options{Break: breakLock}, func() error {
			_, err := s.Destroy(ctx) // the confirmation is the consent for every node
			return err
		})
	})
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask: every node is reset, etcd's data and the cluster's objects are gone")
	addBreakLockFlag(cmd, &breakLock)
	return cmd
}

// confirmDestroy asks for the cluster's name to be typed, as a user about
// to lose every object of the cluster would want to be asked; --yes is
// the consent for scripts.
func confirmDestroy(cmd *cobra.Command, inv *inventory.Inventory, yes bool) error {
	if yes {
		return nil
	}
	name := inv.Cluster.Name
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return fmt.Errorf("destroy resets all %d nodes and deletes cluster %s's data (etcd, every object): run it on a terminal to confirm, or pass --yes", len(inv.Nodes), name)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "destroy resets all %d nodes of cluster %s: etcd's data and every object in the cluster are lost.\nType the cluster's name (%s) to go on: ", len(inv.Nodes), name, name)
	answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(answer) != name {
		return fmt.Errorf("not confirmed: nothing was changed")
	}
	return nil
}

func newKubeconfigCommand() *cobra.Command {
	var out string
	cmd := stackCommand("kubeconfig -f FILE [-o PATH]", "Write the cluster-admin kubeconfig for kubectl (0600, also over an existing file)", func(ctx context.Context, cmd *cobra.Command, s *stack.Stack) error {
		outs, err := s.Outputs(ctx)
		if err != nil {
			return err
		}
		kc, _ := outs["kubeconfig"].Value.(string)
		if kc == "" {
			return fmt.Errorf("the stack has no kubeconfig yet: run homelab up first")
		}
		if err := writeKubeconfig(out, []byte(kc)); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: KUBECONFIG=%s kubectl get nodes\n", out, out)
		return nil
	})
	cmd.Flags().StringVarP(&out, "output", "o", "kubeconfig", "where to write it")
	return cmd
}

func newVerifyCommand() *cobra.Command {
	cmd := stackCommand("verify -f FILE", "Verify the running cluster against the inventory, then run the seed's lab in namespace "+verify.Namespace, func(ctx context.Context, cmd *cobra.Command, s *stack.Stack) error {
		return verifyAndReport(ctx, cmd, s, nil)
	})
	cmd.Long = "Checks nodes, etcd, the API at every address (TLS verified per name) and a write read back from etcd; then " +
		"asks the cluster itself, as the seed's lab does: explain " + verify.DefaultPractice().Resource + " " + verify.DefaultPractice().FieldPath +
		" from its OpenAPI v3 document, the same Deployment created (" + verify.ImperativeName + ") and applied server-side (" +
		verify.DeclarativeName + ") and what differs, a no-op re-apply, a refused second create, a label selector picking one " +
		"Deployment's pods. Both Deployments are deleted afterwards; the namespace " + verify.Namespace + " stays."
	return cmd
}
