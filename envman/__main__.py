from envman.cli import main

main()
