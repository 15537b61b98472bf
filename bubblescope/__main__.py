from bubblescope.cli import main

main()
