// Command webserver is the real node's test web app: it answers GET / with who served the request (pod name, uid,
// the GREETING environment variable) and GET /healthz with 200, or 500 with --fail-healthz.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"
	"time"
)

// reply is the body of GET /: the tests read the serving pod, its user and its configuration from it.
type reply struct {
	Hostname string `json:"hostname"`
	UID      int    `json:"uid"`
	GID      int    `json:"gid"`
	Greeting string `json:"greeting"`
}

func main() {
	listen := flag.String("listen", ":8080", "address to serve on")
	failHealthz := flag.Bool("fail-healthz", false, "answer /healthz with 500, so a readiness probe on it fails")
	flag.Parse()
	host, _ := os.Hostname()
	me := reply{Hostname: host, UID: os.Getuid(), GID: os.Getgid(), Greeting: os.Getenv("GREETING")}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(me)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if *failHealthz {
			http.Error(w, "unhealthy: started with --fail-healthz", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("serving on %s as uid %d (fail-healthz=%v)", *listen, me.UID, *failHealthz)
	log.Fatal(srv.ListenAndServe())
}
