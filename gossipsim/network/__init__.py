"""What a hop carries and costs: messages that know their size, codecs, channels and the links of a
scenario (with the simulated-time horizon)."""
