// Top-level code is main-actor isolated; everything lives in LarderCommand.
LarderCommand.main()
