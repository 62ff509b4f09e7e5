package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// The gauge of WebApps by Ready status is left out, not an error, while the cache cannot be read: a scrape before
// the cache has started still serves every other metric.
func TestReadyCollectorLeavesItselfOutWhileTheCacheCannotBeRead(t *testing.T) {
	c := newReadyCollector(failingReader{})
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil || len(families) != 0 {
		t.Errorf("gather = %v, %v; want no families and no error", families, err)
	}
}

// Every WebApp is counted by its Ready status; those not Ready have a series each, with the reason.
func TestReadyCollectorCountsAndNamesTheWebAppsNotReady(t *testing.T) {
	app := func(ns, name string, conds ...metav1.Condition) client.Object {
		return &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: webappv2.WebAppStatus{Conditions: conds}}
	}
	ready := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: webappv2.ConditionReady, Status: status, Reason: reason}
	}
	reader := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(
		app("a", "up", ready(metav1.ConditionTrue, "Available")),
		app("a", "pull", ready(metav1.ConditionFalse, "ImagePullBackOff")),
		app("b", "new"),
		app("b", "rolling", ready(metav1.ConditionUnknown, "DeploymentProgressing")),
	).Build()
	want := `
# HELP webapp_operator_webapp_not_ready 1 for each WebApp whose Ready condition is not True, with the condition's reason (none while it has no Ready condition).
# TYPE webapp_operator_webapp_not_ready gauge
webapp_operator_webapp_not_ready{reason="",webapp="new",webapp_namespace="b"} 1
webapp_operator_webapp_not_ready{reason="DeploymentProgressing",webapp="rolling",webapp_namespace="b"} 1
webapp_operator_webapp_not_ready{reason="ImagePullBackOff",webapp="pull",webapp_namespace="a"} 1
# HELP webapp_operator_webapps WebApps by the status of their Ready condition.
# TYPE webapp_operator_webapps gauge
webapp_operator_webapps{ready="False"} 1
webapp_operator_webapps{ready="True"} 1
webapp_operator_webapps{ready="Unknown"} 2
`
	if err := testutil.CollectAndCompare(newReadyCollector(reader), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// Once the WebApps' informer has synced, the gauge reads its store in place (a list through the cache copied every
// WebApp at each scrape); before, it lists through the cache, which waits for the sync or fails.
func TestReadyCollectorReadsTheStoreOnceSynced(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for _, name := range []string{"a", "b"} {
		if err := store.Add(&webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		synced bool
		want   string
	}{
		{synced: false, want: ""},
		{synced: true, want: `
# HELP webapp_operator_webapps WebApps by the status of their Ready condition.
# TYPE webapp_operator_webapps gauge
webapp_operator_webapps{ready="False"} 0
webapp_operator_webapps{ready="True"} 0
webapp_operator_webapps{ready="Unknown"} 2
`},
	} {
		c := newReadyCollector(failingReader{})
		c.store, c.synced = store, func() bool { return tc.synced }
		if err := testutil.CollectAndCompare(c, strings.NewReader(tc.want), "webapp_operator_webapps"); err != nil {
			t.Errorf("synced %v: %v", tc.synced, err)
		}
	}
}

// failingReader fails every read, as a cache that has not started does.
type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the cache is not started, can not read objects")
}
