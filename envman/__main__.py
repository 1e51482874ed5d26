from envman.main import main

main()
