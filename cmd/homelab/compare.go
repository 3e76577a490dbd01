package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/infra/impact"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

func init() {
	subcommands = append(subcommands, newCompareCommand)
}

func newCompareCommand() *cobra.Command {
	var path, layouts, format, svgPath, secretsPath string
	cmd := &cobra.Command{
		Use:   "compare -f FILE [--layouts vip,single-ip,dns] [--format table|markdown|json] [--svg FILE]",
		Short: "Predict, per endpoint layout, what each node failure does to etcd's data and to every client of the API",
		Long: `compare renders the inventory in each layout and reads, from the rendered
files, which address every API consumer dials (kubectl, each kubelet, each
controller-manager and scheduler, joins through cluster-info, kube-proxy or
Cilium, each apiserver's etcd). It then predicts, for each failure, whether
etcd keeps quorum, whether the cluster can be written, and whether each
consumer still reaches a working API. Nothing touches a machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch format {
			case "table", "markdown", "json":
			default:
				return command.Exit(2, fmt.Errorf("--format %q: use table, markdown or json", format))
			}
			base, err := loadInventory(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			names := defaultLayouts(base)
			if layouts != "" {
				names = strings.Split(layouts, ",")
			}
			var bundle *pki.Bundle
			if secretsPath != "" {
				if bundle, err = bundleOrFresh(secretsPath, cmd); err != nil {
					return err
				}
			} else if bundle, err = pki.New(); err != nil { // certificates do not change where anything dials
				return err
			}
			// Every layout is checked before anything is written.
			var ps []*impact.Prediction
			for _, l := range names {
				l = strings.TrimSpace(l)
				switch l {
				case inventory.LayoutVIP, inventory.LayoutSingleIP, inventory.LayoutDNS:
				default:
					return command.Exit(1, fmt.Errorf("--layouts: %q is not a layout; use vip, single-ip or dns", l))
				}
				inv, err := loadLayout(path, l, quiet(cmd))
				if err != nil {
					return err
				}
				p, err := impact.ForInventory(inv, bundle)
				if err != nil {
					return fmt.Errorf("%s layout: %w", l, err)
				}
				ps = append(ps, p)
			}
			var svg bytes.Buffer
			if svgPath != "" {
				if err := impact.WriteSVG(&svg, ps); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			switch format {
			case "markdown":
				err = impact.WriteMarkdown(out, ps)
			case "json":
				err = impact.WriteJSON(out, ps)
			default:
				err = impact.WriteTable(out, ps)
			}
			if err != nil {
				return err
			}
			if svgPath != "" {
				if err := os.WriteFile(svgPath, svg.Bytes(), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", svgPath)
			}
			return nil
		},
	}
	command.FileFlag(cmd, &path)
	cmd.Flags().StringVar(&layouts, "layouts", "", "comma-separated layouts to compare (default: vip and single-ip, and dns when cluster.endpoint.dnsName is set)")
	cmd.Flags().StringVar(&format, "format", "table", "table, markdown or json")
	cmd.Flags().StringVar(&svgPath, "svg", "", "also write a heat-map (layout x failure x consumer) to this SVG file")
	cmd.Flags().StringVar(&secretsPath, "secrets", "", "secrets bundle (default: a throwaway one; secrets do not change who dials where)")
	return cmd
}

func defaultLayouts(inv *inventory.Inventory) []string {
	out := []string{inventory.LayoutVIP, inventory.LayoutSingleIP}
	if inv.Cluster.Endpoint.DNSName != "" {
		out = append(out, inventory.LayoutDNS)
	}
	return out
}

// quiet keeps loadLayout from repeating the inventory's warnings once per
// layout; the first load printed them.
func quiet(cmd *cobra.Command) *cobra.Command {
	c := &cobra.Command{}
	c.SetErr(&bytes.Buffer{})
	c.SetOut(cmd.OutOrStdout())
	return c
}
