package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The gauge of WebApps by Ready status is left out, not an error, while the cache cannot be read: a scrape before
// the cache has started still serves every other metric.
func TestReadyCollectorLeavesItselfOutWhileTheCacheCannotBeRead(t *testing.T) {
	c := &readyCollector{reader: failingReader{}, desc: prometheus.NewDesc("webapp_operator_webapps", "test", []string{"ready"}, nil)}
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil || len(families) != 0 {
		t.Errorf("gather = %v, %v; want no families and no error", families, err)
	}
}

// failingReader fails every read, as a cache that has not started does.
type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the cache is not started, can not read objects")
}
