package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

func init() {
	subcommands = append(subcommands, newDoctorCommand)
}

func newDoctorCommand() *cobra.Command {
	var path, secrets, stateDir, state, stackName string
	cmd := &cobra.Command{
		Use:   "doctor -f FILE",
		Short: "Check the live cluster against the inventory and name what is wrong (exit 1 when something is)",
		Long: "Reads every node over SSH, makes a TLS handshake with every address the API should answer at, " +
			"asks etcd and the API, and names selectors that select nothing (Services without endpoints, PodDisruptionBudgets, " +
			"NetworkPolicies and Deployments matching no pod) with the closest labels that exist; changes nothing. " +
			"Prints a table and the causes it found, and exits 1 when a check failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, err := loadInventory(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if stackName == "" {
				stackName = inv.Cluster.Name
			}
			if stateDir == "" {
				stateDir = stack.DefaultStateDir()
			}
			if secrets == "" {
				secrets = filepath.Join(stateDir, stackName, "secrets.yaml")
			}
			data, err := os.ReadFile(secrets)
			if err != nil {
				return fmt.Errorf("the secrets bundle (the cluster's CAs): %w (pass --secrets)", err)
			}
			bundle, err := pki.Parse(data)
			if err != nil {
				return err
			}
			key, err := inv.SSH.ReadPrivateKey()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Minute)
			defer cancel()
			rep, err := doctor.Run(ctx, doctor.Target{Inventory: inv, Bundle: bundle, PrivateKey: key,
				KnownHosts: inv.SSH.KnownHosts, Dial: doctor.DialFunc(dialer()), CommandLog: commandLog(),
				MACs: recordedMACs(ctx, cmd, inv, path, stateDir, state, stackName)})
			if err != nil {
				return err
			}
			rep.Write(cmd.OutOrStdout())
			if !rep.OK() {
				return command.Exit(1, fmt.Errorf("%d check(s) failed", len(rep.Failed())))
			}
			return nil
		},
	}
	command.FileFlag(cmd, &path)
	cmd.Flags().StringVar(&secrets, "secrets", "", "secrets bundle (default: <state-dir>/<stack>/secrets.yaml)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "state directory (default "+stack.DefaultStateDir()+")")
	cmd.Flags().StringVar(&state, "state", "", "the Pulumi state backend, as up's --state (default $PULUMI_BACKEND_URL, else the file backend in --state-dir)")
	cmd.Flags().StringVar(&stackName, "stack", "", "stack name (default: the inventory's cluster name)")
	return cmd
}

// recordedMACs are the nodes' MACs the last up recorded, for nodes the
// inventory declares without one; nil (with a note) when the stack
// cannot be read, as doctor also serves clusters homelab did not build.
func recordedMACs(ctx context.Context, cmd *cobra.Command, inv *inventory.Inventory, path, stateDir, state, stackName string) map[string][]string {
	declared := true
	for _, n := range inv.Nodes {
		declared = declared && n.MAC != ""
	}
	// Only a stack up has opened (its bundle is where up keeps it): doctor
	// creates nothing.
	if _, err := os.Stat(stack.BundlePath(stateDir, stackName)); declared || err != nil {
		return nil
	}
	s, err := stack.Open(ctx, stack.Options{Inventory: path, StateDir: stateDir, Backend: state, Stack: stackName})
	var macs map[string][]string
	if err == nil {
		macs, err = s.MACs(ctx)
	}
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: the MACs up recorded are not readable (%v): a node that moved is looked for only by a declared nodes[].mac\n", err)
	}
	return macs
}
