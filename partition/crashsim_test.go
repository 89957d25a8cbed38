package partition

import "time"

func (l *Log) abandon() { l.Kill() }

func waitBriefly() { time.Sleep(time.Millisecond) }
