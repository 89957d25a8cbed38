package main

import (
	"errors"
	"flag"
	"regexp"
)

// flagMessages are the flag package's messages that name a flag, with the
// name's single dash: the usage shows flags with two (printFlags), so the
// error does too.
var flagMessages = []*regexp.Regexp{
	regexp.MustCompile(`^(flag provided but not defined: )-+(.+)$`),
	regexp.MustCompile(`^(flag needs an argument: )-+(.+)$`),
	regexp.MustCompile(`^(invalid value ".*" for flag )-+([^:]+)(: .*)$`),
	regexp.MustCompile(`^(invalid boolean value ".*" for )-+([^:]+)(: .*)$`),
	regexp.MustCompile(`^(invalid boolean flag )-*([^:]+)(: .*)$`),
}

// gnuFlagError returns err with the flag it names written --name, as the
// usage shows it; flag.ErrHelp and other errors are returned as they are.
func gnuFlagError(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	for _, re := range flagMessages {
		if re.MatchString(msg) {
			return errors.New(re.ReplaceAllString(msg, "${1}--${2}${3}"))
		}
	}
	return err
}
