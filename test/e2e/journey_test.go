package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

func example(name string) string {
	return filepath.Join(cluster.RepoRoot(), "manifests", "examples", name)
}

// step runs one step of the journey; the journey stops at the first failed step, since later ones build on it.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// TestUserJourney is the README's experiments, in order, with the tools a user has.
func TestUserJourney(t *testing.T) {
	const requeue = 2 * time.Second
	step(t, "the install manifests apply, and the operator's pod passes the restricted Pod Security Standard", func(t *testing.T) {
		// kwok only pretends to run the pod, so the manager in it does nothing; the tests run their own below.
		// The CRD is the harness's, with its conversion served by the test (the tree's would point it at the
		// operator's Service, which pods kwok only pretends to run cannot serve): the rest of the tree is applied.
		tree := kubectl(t, "kustomize", filepath.Join(cluster.RepoRoot(), "manifests"))
		var rest []string
		for doc := range strings.SplitSeq(tree, "\n---\n") {
			if !strings.Contains(doc, "\nkind: CustomResourceDefinition\n") {
				rest = append(rest, doc)
			}
		}
		if _, err := kubectlIn(strings.Join(rest, "\n---\n"), "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		kubectl(t, "wait", "--for=condition=Available", "--timeout=60s", "-n", "webapp-system", "deployment/webapp-operator")
		jsonpathEquals(t, "namespace/webapp-system", `{.metadata.labels.pod-security\.kubernetes\.io/enforce}`, "restricted")
		kubectl(t, "delete", "-n", "webapp-system", "deployment/webapp-operator")
	})
	kubectl(t, "apply", "--server-side", "-f", filepath.Join(cluster.RepoRoot(), "manifests", "crd", "example.com_webapps.yaml"))
	waitEstablished(t, "crd/webapps.example.com")
	mgr := startManager(t, "manager-1", "--requeue-after="+requeue.String())

	step(t, "nginx example becomes Ready with 3 available replicas", func(t *testing.T) {
		kubectl(t, "apply", "--server-side", "-f", example("nginx-webapp.yaml"))
		kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "webapp/nginx-app")
		jsonpathEquals(t, "webapp/nginx-app", "{.status.availableReplicas}", "3")
		jsonpathEquals(t, "deployment/nginx-app", "{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}", "3 nginx:1.25 80")
		jsonpathEquals(t, "service/nginx-app", "{.spec.ports[0].port}", "80")
		for _, obj := range []string{"deployment/nginx-app", "service/nginx-app"} {
			jsonpathEquals(t, obj, `{.metadata.ownerReferences[?(@.controller==true)].kind}/{.metadata.ownerReferences[0].name}`, "WebApp/nginx-app")
		}
	})

	step(t, "the simple example becomes Ready too", func(t *testing.T) {
		kubectl(t, "apply", "--server-side", "-f", example("simple-webapp.yaml"))
		kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "webapp/simple-webapp")
		jsonpathEquals(t, "webapp/simple-webapp", "{.status.availableReplicas} {.status.url}", "2 http://simple-webapp.default.svc:8080")
	})

	step(t, "patched to 5 replicas, 5 become available", func(t *testing.T) {
		kubectl(t, "patch", "webapp", "nginx-app", "--type=merge", "-p", `{"spec":{"replicas":5}}`)
		jsonpathEquals(t, "deployment/nginx-app", "{.spec.replicas}", "5")
		jsonpathEquals(t, "webapp/nginx-app", "{.status.availableReplicas}", "5")
		kubectl(t, "wait", "--for=condition=Ready", "--timeout=60s", "webapp/nginx-app")
	})

	step(t, "kubectl scale webapp carries to the Deployment", func(t *testing.T) {
		kubectl(t, "scale", "webapp", "nginx-app", "--replicas=2")
		jsonpathEquals(t, "deployment/nginx-app", "{.spec.replicas}", "2")
		jsonpathEquals(t, "webapp/nginx-app", "{.status.availableReplicas} {.status.replicas}", "2 2")
	})

	step(t, "a deleted Deployment is recreated and Ready again", func(t *testing.T) {
		oldUID := kubectl(t, "get", "deployment/nginx-app", "-o", "jsonpath={.metadata.uid}")
		kubectl(t, "delete", "deployment", "nginx-app", "--wait=false")
		testutil.Eventually(t, time.Minute, "recreated", func(context.Context) error {
			uid, err := kubectlIn("", "get", "deployment/nginx-app", "-o", "jsonpath={.metadata.uid}")
			if err != nil || uid == oldUID || uid == "" {
				return fmt.Errorf("uid %q (old %q): %w", uid, oldUID, err)
			}
			return nil
		})
		jsonpathEquals(t, "webapp/nginx-app", "{.status.availableReplicas}", "2")
		kubectl(t, "wait", "--for=condition=Ready", "--timeout=60s", "webapp/nginx-app")
	})

	step(t, "drift is put back, another manager's annotation stays", func(t *testing.T) {
		kubectl(t, "annotate", "deployment", "nginx-app", "team=payments")
		kubectl(t, "scale", "deployment", "nginx-app", "--replicas=7")
		jsonpathEquals(t, "deployment/nginx-app", "{.spec.replicas}", "2")
		kubectl(t, "set", "image", "deployment/nginx-app", "*=busybox")
		jsonpathEquals(t, "deployment/nginx-app", "{.spec.template.spec.containers[0].image}", "nginx:1.25")
		jsonpathEquals(t, "deployment/nginx-app", "{.metadata.annotations.team}", "payments")
		kubectl(t, "wait", "--for=condition=Ready", "--timeout=60s", "webapp/nginx-app")
	})

	step(t, "kubectl describe shows events and /metrics counts what happened", func(t *testing.T) {
		describe := kubectl(t, "describe", "webapp", "nginx-app")
		for _, want := range []string{"Created", "Created Deployment nginx-app", "DriftRepaired", "Put back Deployment nginx-app", "Updated"} {
			if !strings.Contains(describe, want) {
				t.Errorf("kubectl describe webapp nginx-app lacks %q:\n%s", want, describe)
			}
		}
		testutil.Eventually(t, 30*time.Second, "metrics", func(context.Context) error {
			// A deleted Deployment counts as created; the scaled one and the new image are repairs.
			for _, m := range []struct {
				name            string
				labels          map[string]string
				atLeast, atMost float64
			}{
				{"webapp_operator_drift_repairs_total", map[string]string{"kind": "Deployment"}, 2, math.Inf(1)},
				{"webapp_operator_webapps", map[string]string{"ready": "True"}, 2, 2},
				{"webapp_operator_applies_total", map[string]string{"kind": "Deployment", "result": "skipped"}, 1, math.Inf(1)},
				{"webapp_operator_applies_total", map[string]string{"kind": "WebAppStatus", "result": "sent"}, 1, math.Inf(1)},
			} {
				if v := mgr.metric(t, m.name, m.labels); v < m.atLeast || v > m.atMost {
					return fmt.Errorf("%s%v = %v, want %v to %v", m.name, m.labels, v, m.atLeast, m.atMost)
				}
			}
			return nil
		})
	})

	step(t, "managed fields show webapp-operator applying each object", func(t *testing.T) {
		for _, tc := range []struct{ obj, subresource string }{
			{"deployment/nginx-app", ""}, {"service/nginx-app", ""}, {"webapp/nginx-app", "status"},
		} {
			var obj struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal([]byte(kubectl(t, "get", tc.obj, "-o", "json", "--show-managed-fields")), &obj); err != nil {
				t.Fatal(err)
			}
			if len(testutil.AppliedBy(obj.Metadata.ManagedFields, "webapp-operator", tc.subresource)) == 0 {
				t.Errorf("%s: no Apply entry of webapp-operator (subresource %q) in %+v", tc.obj, tc.subresource, obj.Metadata.ManagedFields)
			}
		}
	})

	step(t, "invalid WebApps are refused with the server's message", func(t *testing.T) {
		for _, tc := range []struct{ name, spec, want string }{
			{"zero", `{"image":"nginx","replicas":0}`, "spec.replicas in body should be greater than or equal to 1"},
			{"big-port", `{"image":"nginx","port":70000}`, "spec.port in body should be less than or equal to 65535"},
			{"blank", `{"image":" "}`, "spec.image in body should match"},
			{"my.app", `{"image":"nginx"}`, "metadata.name must be a DNS-1035 label"},
		} {
			doc := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":%q},"spec":%s}`, tc.name, tc.spec)
			_, err := kubectlIn(doc, "apply", "--server-side", "-f", "-")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
			}
			if _, err := kubectlIn("", "get", "webapp", tc.name); err == nil || !strings.Contains(err.Error(), "NotFound") {
				t.Errorf("%s: stored after a refusal (%v)", tc.name, err)
			}
		}
	})

	step(t, "a restarted operator rewrites nothing", func(t *testing.T) {
		objs := []string{"webapp/nginx-app", "deployment/nginx-app", "service/nginx-app", "webapp/simple-webapp", "deployment/simple-webapp", "service/simple-webapp"}
		before := resourceVersions(t, objs)
		mgr.stop(t)
		second := startManager(t, "manager-2", "--requeue-after="+requeue.String())
		// Every WebApp reconciled by the new process (from its initial list), then three resyncs, and a fourth so
		// that what the third enqueued has been reconciled.
		testutil.Eventually(t, time.Minute, "three resyncs", func(context.Context) error {
			reconciled := second.metric(t, "controller_runtime_reconcile_total", map[string]string{"controller": "webapp"})
			if walks := second.metric(t, "webapp_operator_resyncs_total", nil); reconciled < 2 || walks < 4 {
				return fmt.Errorf("%v reconciles, %v resyncs", reconciled, walks)
			}
			return nil
		})
		if after := resourceVersions(t, objs); after != before {
			t.Errorf("resourceVersions changed after a restart:\nbefore %s\nafter  %s", before, after)
		}
	})

	step(t, "a deleted WebApp takes its Deployment and Service with it", func(t *testing.T) {
		kubectl(t, "delete", "webapp", "nginx-app")
		waitDeleted(t, "default", "deployment/nginx-app", "service/nginx-app")
	})
}

func resourceVersions(t *testing.T, objs []string) string {
	t.Helper()
	var parts []string
	for _, o := range objs {
		parts = append(parts, o+"@"+kubectl(t, "get", o, "-o", "jsonpath={.metadata.resourceVersion}"))
	}
	return strings.Join(parts, " ")
}
