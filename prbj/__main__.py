from prbj.cli import main

main()
