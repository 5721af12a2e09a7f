#!/usr/bin/env bash
exec /work/main/build/strata "$@" --cpu-bind none
