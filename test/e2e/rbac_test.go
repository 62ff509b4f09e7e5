package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

// Whoever may create WebApps in a namespace may run workloads there, so WebApps are granted like Deployments: the
// shipped webapp-editor and webapp-viewer ClusterRoles aggregate into the built-in admin, edit and view roles
// (through kube-controller-manager's clusterrole-aggregation controller), and a namespace's editors may create
// WebApps, its viewers only read them.
func TestWebAppRolesAggregateIntoAdminEditAndView(t *testing.T) {
	const ns = "rbac"
	setup(t, ns)
	for _, f := range []string{"webapp_editor_role.yaml", "webapp_viewer_role.yaml"} {
		kubectl(t, "apply", "--server-side", "-f", filepath.Join(cluster.RepoRoot(), "manifests", "rbac", f))
	}
	for _, role := range []string{"admin", "edit", "view"} {
		kubectl(t, "create", "rolebinding", "-n", ns, role, "--clusterrole="+role, "--user=an-"+role)
	}
	cases := []struct {
		user, verb, resource string
		want                 string // kubectl auth can-i's answer
	}{
		{"an-admin", "create", "webapps.example.com", "yes"},
		{"an-admin", "delete", "webapps.example.com", "yes"},
		{"an-edit", "create", "webapps.example.com", "yes"},
		{"an-edit", "patch", "webapps.example.com", "yes"},
		{"an-edit", "update", "webapps.example.com/scale", "yes"},
		{"an-view", "list", "webapps.example.com", "yes"},
		{"an-view", "get", "webapps.example.com/status", "yes"},
		{"an-view", "create", "webapps.example.com", "no"},
		{"an-view", "update", "webapps.example.com/scale", "no"},
		{"an-edit", "patch", "webapps.example.com/status", "no"}, // the status is the operator's
		{"nobody", "list", "webapps.example.com", "no"},
	}
	for _, tc := range cases {
		// The aggregation controller adds the rules shortly after the roles are created: poll until it has.
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%s can-i %s %s: %s", tc.user, tc.verb, tc.resource, tc.want), func(context.Context) error {
			args := []string{"auth", "can-i", "-n", ns, "--as=" + tc.user, tc.verb}
			if resource, sub, ok := strings.Cut(tc.resource, "/"); ok {
				args = append(args, resource, "--subresource="+sub)
			} else {
				args = append(args, resource)
			}
			// can-i exits 1 with the answer "no": the answer, not the exit code, is what counts.
			out, err := kubectlIn("", args...)
			switch got := strings.TrimSpace(out); {
			case got != "yes" && got != "no":
				return fmt.Errorf("no answer: %q (%w)", out, err)
			case got != tc.want:
				return fmt.Errorf("answer %s", got)
			}
			return nil
		})
	}
}
