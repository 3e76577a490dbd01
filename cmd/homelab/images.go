package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/infra/images"
	"github.com/homelab-dev/homelab/inventory"
)

func init() { subcommands = append(subcommands, newImagesCommand) }

func newImagesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "List the images the declared cluster pulls, and copy them into its registry mirror",
	}
	cmd.AddCommand(newImagesListCommand(), newImagesMirrorCommand())
	return cmd
}

// listImages lists the inventory's images, warnings to stderr.
func listImages(cmd *cobra.Command, inv *inventory.Inventory, kubeadm string) ([]images.Image, error) {
	imgs, warnings, err := images.List(inv, images.ListOptions{Kubeadm: kubeadm})
	for _, w := range warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
	}
	return imgs, err
}

func newImagesListCommand() *cobra.Command {
	var path, kubeadm string
	cmd := &cobra.Command{
		Use:   "list -f FILE [--kubeadm PATH]",
		Short: "Print every image the declared cluster pulls, one per line, with what pulls it",
		Long: "Print every image the declared cluster pulls: kubeadm's for cluster.kubernetesVersion, " +
			"the Cilium chart's rendered with the cluster's values (cluster.cilium.chart, else the pinned official chart, fetched), " +
			"and NVIDIA's device plugin where GPU workers run it. The first column is what `images mirror` copies.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The SSH files need not exist: no node is reached.
			inv, err := loadInventory(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			imgs, err := listImages(cmd, inv, kubeadm)
			for _, img := range imgs {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", img.Ref, img.For)
			}
			return err
		},
	}
	command.FileFlag(cmd, &path)
	cmd.Flags().StringVar(&kubeadm, "kubeadm", "", "a kubeadm binary of cluster.kubernetesVersion to ask for its images instead of this tool's table")
	return cmd
}

func newImagesMirrorCommand() *cobra.Command {
	var path, kubeadm, to, from string
	var layouts []string
	cmd := &cobra.Command{
		Use:   "mirror -f FILE [--to URL] [--from URL | --from-layout DIR...]",
		Short: "Copy every image the declared cluster pulls into its registry mirror",
		Long: "Copy every image `images list` prints into the mirror cluster.registry declares for its registry " +
			"(or --to), under its repository path without the registry's host, as containerd asks a mirror. " +
			"The images come from OCI layouts (--from-layout, e.g. written by `crane pull --format oci` on a machine with the Internet), " +
			"another mirror (--from), or else each image's own registry. Images already there are left alone; " +
			"every image that cannot be copied is named at the end.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to != "" {
				if err := images.CheckURL(to); err != nil {
					return command.Exit(2, fmt.Errorf("--to: %w", err))
				}
			}
			if from != "" && len(layouts) > 0 {
				return command.Exit(2, fmt.Errorf("--from and --from-layout: give one source"))
			}
			inv, err := loadInventory(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if to == "" && len(inv.Cluster.RegistryMirrors()) == 0 {
				return command.Exit(2, fmt.Errorf("%s declares no registry mirror: set cluster.registry.mirror, or give --to URL", path))
			}
			imgs, err := listImages(cmd, inv, kubeadm)
			if err != nil {
				return err
			}
			targets := inv.Cluster.RegistryMirrors()
			if to != "" {
				targets = map[string]string{}
				for _, img := range imgs {
					if host, err := images.RegistryOf(img.Ref); err == nil {
						targets[host] = to
					}
				}
			}
			src := images.Source{Registry: from, Layouts: layouts}
			fmt.Fprintf(cmd.ErrOrStderr(), "mirroring %d images from %s into %s\n", len(imgs), src, describeTargets(targets))
			res, err := images.Mirror(cmd.Context(), imgs, src, targets, func(format string, args ...any) {
				fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...)
			})
			fmt.Fprintf(cmd.OutOrStdout(), "%d copied, %d already there, %d failed\n", res.Copied, res.Present, len(imgs)-res.Copied-res.Present)
			return err
		},
	}
	command.FileFlag(cmd, &path)
	cmd.Flags().StringVar(&kubeadm, "kubeadm", "", "a kubeadm binary of cluster.kubernetesVersion to ask for its images instead of this tool's table")
	cmd.Flags().StringVar(&to, "to", "", "the mirror to fill, http(s)://HOST[:PORT] (default: cluster.registry's mirror of each image's registry)")
	cmd.Flags().StringVar(&from, "from", "", "a registry serving the images as a mirror does, http(s)://HOST[:PORT] (default: each image's own registry)")
	cmd.Flags().StringArrayVar(&layouts, "from-layout", nil, "an OCI layout directory holding the images by name (repeatable)")
	return cmd
}

func describeTargets(t map[string]string) string {
	byURL := map[string][]string{}
	for host, u := range t {
		byURL[u] = append(byURL[u], host)
	}
	urls := make([]string, 0, len(byURL))
	for u := range byURL {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	out := ""
	for i, u := range urls {
		sort.Strings(byURL[u])
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s (%v)", u, byURL[u])
	}
	return out
}
