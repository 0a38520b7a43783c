package main

import (
	"os"

	"github.com/walq/walq/internal/cli"
)

func main() { os.Exit(cli.Main(nil)) }
