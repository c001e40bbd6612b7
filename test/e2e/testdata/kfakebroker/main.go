// Command kfakebroker is the Kafka broker of the end-to-end tests:
// franz-go's kfake (a Kafka-protocol broker in memory) on 127.0.0.1:<port>,
// the given topics seeded with one partition each. It prints "ready" once
// it listens and runs until its standard input closes.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "listen port on 127.0.0.1")
	topics := flag.String("topics", "", "comma-separated topics to create")
	flag.Parse()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(*port), kfake.AllowAutoTopicCreation()}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(1, strings.Split(*topics, ",")...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfakebroker:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}
