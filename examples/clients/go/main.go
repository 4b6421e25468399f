// SPDX-License-Identifier: MIT

// Command client is a complete zkelect app in Go (standard library only).
// It asks its agent over the Unix socket whether this instance leads
// (GET /v1/status), then long-polls for changes (GET /v1/status?wait=30s&index=N).
// Whenever an answer says is_leader, it does its "work": one write that
// carries that answer's epoch, here a line "epoch=E" appended to a file.
// A real app sends the epoch with its write, and the resource refuses a
// write whose epoch is lower than one it has already seen.
//
//	go run . -socket /run/zkelect/zkelect.sock -out /tmp/writes.txt
//
// An agent that cannot be reached, or does not answer in time, counts as
// "not leader": the client writes nothing until an answer says otherwise.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// status holds the fields of /v1/status this app uses.
type status struct {
	ID               string  `json:"id"`
	Role             string  `json:"role"`
	IsLeader         bool    `json:"is_leader"`
	Epoch            *uint64 `json:"epoch"` // null unless leading
	LeaseRemainingMs int64   `json:"lease_remaining_ms"`
	Index            uint64  `json:"index"`
}

// newClient returns an HTTP client whose every connection goes to the
// agent's Unix socket, whatever the URL's host says.
func newClient(socket string, timeout time.Duration) *http.Client {
	var d net.Dialer
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", socket)
			},
		},
	}
}

// get asks for the status; with index >= 0 it long-polls: the agent answers
// as soon as its index passes index, or after wait with the same document.
func get(ctx context.Context, c *http.Client, index int64, wait time.Duration) (*status, error) {
	url := "http://zkelect/v1/status"
	if index >= 0 {
		url = fmt.Sprintf("%s?wait=%dms&index=%d", url, wait.Milliseconds(), index)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent answered %s", resp.Status)
	}
	var s status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

// write is the fenced write: it carries the epoch of the answer that said
// "you lead". Here it appends "epoch=E" to a file; a database would do
// UPDATE ... SET ..., epoch = E WHERE ... AND epoch <= E.
func write(path string, epoch uint64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "epoch=%d\n", epoch); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func main() {
	socket := flag.String("socket", "/run/zkelect/zkelect.sock", "the agent's Unix socket")
	out := flag.String("out", "writes.txt", "file the fenced writes go to")
	wait := flag.Duration("wait", 30*time.Second, "long-poll wait")
	flag.Parse()
	log.SetFlags(0)

	// The client's own deadline: the long poll's wait and a little more.
	c := newClient(*socket, *wait+5*time.Second)
	// SIGTERM or SIGINT cancels the request in flight, long poll included.
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	index := int64(-1) // the first request is a plain GET
	for ctx.Err() == nil {
		s, err := get(ctx, c, index, *wait)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			// Unreachable or no answer in time: not leader. Retry soon.
			log.Printf("agent unreachable (%v): not leader", err)
			index = -1
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if int64(s.Index) != index {
			epoch := "null"
			if s.Epoch != nil {
				epoch = fmt.Sprint(*s.Epoch)
			}
			log.Printf("status: role=%s is_leader=%t epoch=%s index=%d",
				s.Role, s.IsLeader, epoch, s.Index)
			if s.IsLeader && s.Epoch != nil && s.LeaseRemainingMs > 0 {
				if err := write(*out, *s.Epoch); err != nil {
					log.Fatalf("write: %v", err)
				}
				log.Printf("write: epoch=%d", *s.Epoch)
			}
		}
		index = int64(s.Index)
	}
	log.Printf("stopping")
}
